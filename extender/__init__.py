"""loadwise extender: a kube-scheduler HTTP extender that scores nodes by real load.

Modules, by what they hold:

- ``wire``       the extender v1 JSON the kube-scheduler sends and expects
- ``quantity``   Kubernetes resource quantities ("250m", "1Gi", "1e3")
- ``model``      load snapshots and per-node state the policies score
- ``estimate``   what a pod will use before the metrics can show it
- ``policies``   the scoring policies (pure functions, Trimaran-compatible)
- ``decide``     filter and prioritize over a list of nodes
- ``ledger``     pods placed since the last load window (herding protection)
- ``sources``    where load comes from: load-watcher, metrics-server, Prometheus, a file
- ``cluster``    the extender's own watch of nodes and pods
- ``events``     the Event recorded on each pod, saying why
- ``server``     the aiohttp application, fail-open
- ``config``/``cli``  settings and the ``loadwise-extender`` command
"""

__version__ = "0.1.0"
