"""What the banner and notices say, derived from the model: pure, so tests pin the wording."""

from __future__ import annotations

from datetime import datetime, timedelta

from .model import ClusterModel

__all__ = [
    "banner_text",
    "is_stale",
    "metrics_stale",
    "nodes_notice",
    "placements_notice",
    "summary",
]


def _clock(at: datetime | None) -> str:
    return at.astimezone().strftime("%H:%M:%S") if at else "never"


def is_stale(model: ClusterModel) -> bool:
    """Data is stale while the API server is unreachable: it is whatever we saw last."""
    return model.connected is False


def metrics_stale(model: ClusterModel, now: datetime, refresh: float) -> bool:
    if model.metrics_at is None:
        return False
    return is_stale(model) or now - model.metrics_at > timedelta(seconds=max(3 * refresh, 45))


def banner_text(model: ClusterModel) -> str:
    if model.connected is not False:
        return ""
    seen = (
        "nothing received yet"
        if model.last_contact is None
        else (f"showing STALE data as of {_clock(model.last_contact)}")
    )
    return (
        f"⚠ API server unreachable since {_clock(model.unreachable_since)}: "
        f"{model.unreachable_reason}. "
        f"{seen}; reconnecting (next try in {model.retry_in:.0f}s)."
    )


def nodes_notice(model: ClusterModel, now: datetime, refresh: float) -> str:
    if model.metrics_available is False:
        return (
            f"ⓘ No live usage: {model.metrics_reason}. Bars show REQUESTS (blue) of allocatable, "
            "not actual use."
        )
    if metrics_stale(model, now, refresh):
        return f"ⓘ Usage is stale: last metrics.k8s.io sample at {_clock(model.metrics_at)}."
    return ""


def placements_notice(model: ClusterModel) -> str:
    if model.has_decisions:
        return ""
    return (
        "ⓘ No LoadwiseScored Events seen: placements are shown without scores. "
        "Is the loadwise extender installed, with events enabled (it needs a kubeconfig)?"
    )


def summary(model: ClusterModel, description: str) -> str:
    ready = sum(1 for n in model.nodes.values() if n.info.ready)
    text = f"{description} · {ready}/{len(model.nodes)} nodes ready · {len(model.pods)} pods"
    if model.metrics_at is not None:
        text += f" · metrics {_clock(model.metrics_at)}"
    if skipped := model.skipped_total:
        text += f" · {skipped} object{'s' if skipped != 1 else ''} skipped"
    if is_stale(model):
        text += " · STALE"
    return text
