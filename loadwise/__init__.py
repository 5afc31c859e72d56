"""loadwise: load-aware scheduling for small Kubernetes clusters.

The installed distribution holds two packages under this one name, so a laptop that installs
the dashboard gets no generic top-level module names:

- ``loadwise.extender``  the kube-scheduler HTTP extender (``loadwise-extender``)
- ``loadwise.tui``       the terminal dashboard (``loadwise-tui``)

In the source tree they live at the top level (``extender/``, ``tui/``) and this directory
links to them; the wheel holds their files under ``loadwise/``.
"""
