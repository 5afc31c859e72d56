"""Scoring policies, chosen by name (``--policy``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from ..estimate import (
    TLP_DEFAULT_CPU_MILLIS,
    TLP_REQUESTS_MULTIPLIER,
    TLP_TARGET_UTILIZATION,
    TLPArgs,
)
from ..exceptions import PolicyError, QuantityError
from ..quantity import cpu_millis
from .base import MAX_SCORE, NodeScore, Policy, to_extender_priority
from .least_used import LeastUsed
from .load_variation import LoadVariationRiskBalancing
from .target_load_packing import TargetLoadPacking

__all__ = [
    "MAX_SCORE",
    "POLICIES",
    "POLICY_NAMES",
    "LeastUsed",
    "LoadVariationRiskBalancing",
    "NodeScore",
    "Policy",
    "PolicyChoice",
    "PolicyError",
    "TargetLoadPacking",
    "make_policy",
    "parse_policy",
    "tlp_args",
    "to_extender_priority",
]


def _number(args: Mapping[str, Any], key: str, default: float, low: float | None = None) -> float:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise PolicyError(f"policy_args.{key} must be a number, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise PolicyError(f"policy_args.{key} must be a number, got {value!r}") from None
    if low is not None and number < low:
        raise PolicyError(f"policy_args.{key} must be >= {low}, got {number}")
    return number


def tlp_args(args: Mapping[str, Any]) -> TLPArgs:
    """TargetLoadPacking's arguments from ``policy_args``: the target, and how the
    CPU of a pod not yet measured is predicted (also used, with these defaults, by
    the ledger under the other policies)."""
    target = _number(args, "targetUtilization", TLP_TARGET_UTILIZATION)
    if not 0 < target < 100:
        target = TLP_TARGET_UTILIZATION  # Trimaran applies the default to values <= 0
    requests = args.get("defaultRequests") or {}
    if not isinstance(requests, Mapping):
        raise PolicyError(f"policy_args.defaultRequests must be a mapping, got {requests!r}")
    cpu = requests.get("cpu")
    try:
        default_cpu = TLP_DEFAULT_CPU_MILLIS if cpu is None else cpu_millis(cpu)
    except QuantityError as exc:
        raise PolicyError(f"policy_args.defaultRequests.cpu: {exc}") from None
    return TLPArgs(
        default_cpu_millis=default_cpu,
        requests_multiplier=_number(args, "defaultRequestsMultiplier", TLP_REQUESTS_MULTIPLIER),
        target_utilization=target,
    )


class PolicyChoice(msgspec.Struct, frozen=True):
    """A policy parsed from its name and ``policy_args``, once: the scorer, and
    TargetLoadPacking's arguments (under the other policies Trimaran's defaults, which
    the ledger and the pod's TLP prediction read whatever the policy)."""

    policy: Policy
    tlp: TLPArgs


def _least_used(args: dict[str, Any], spread_weight: float) -> PolicyChoice:
    weights = args.pop("resources", {"cpu": 1, "memory": 1})
    if not isinstance(weights, Mapping) or not weights:
        raise PolicyError("policy_args.resources must map cpu/memory/pods to weights")
    unknown = set(weights) - {"cpu", "memory", "pods"}
    if unknown:
        raise PolicyError(
            f"policy_args.resources: unknown resource(s) {sorted(unknown)}; use cpu, memory, pods"
        )
    clean = {k: _number(weights, k, 0, low=0) for k in weights}
    if not any(clean.values()):
        raise PolicyError("policy_args.resources: at least one weight must be > 0")
    # Default 1, not Koordinator's 0: measured in the lab (tests/lab/test_e2e_scheduling.py),
    # averaging a free CPU with an exhausted memory let the real scheduler keep placing
    # pods on a node whose memory was 75 % used by processes no pod requests; counting
    # the worst resource again stops it.
    dominant = _number(args, "dominantResourceWeight", 1, low=0)
    args.pop("dominantResourceWeight", None)
    policy = LeastUsed(weights=clean, dominant_weight=dominant, spread_weight=spread_weight)
    return PolicyChoice(policy, TLPArgs())


def _target_load_packing(args: dict[str, Any], spread_weight: float) -> PolicyChoice:
    tlp = tlp_args(args)
    for key in ("targetUtilization", "defaultRequests", "defaultRequestsMultiplier"):
        args.pop(key, None)
    return PolicyChoice(TargetLoadPacking(target_utilization=tlp.target_utilization), tlp)


def _load_variation(args: dict[str, Any], spread_weight: float) -> PolicyChoice:
    margin = _number(args, "safeVarianceMargin", 1.0)
    sensitivity = _number(args, "safeVarianceSensitivity", 1.0)
    args.pop("safeVarianceMargin", None)
    args.pop("safeVarianceSensitivity", None)
    # Trimaran's defaulting: negative values fall back to 1.
    policy = LoadVariationRiskBalancing(
        safe_variance_margin=margin if margin >= 0 else 1.0,
        safe_variance_sensitivity=sensitivity if sensitivity >= 0 else 1.0,
    )
    return PolicyChoice(policy, TLPArgs())


# The registry: every policy by its ``--policy`` name, each parser taking the keys of
# ``policy_args`` it knows off a copy (what is left over is an error). The CLI's choices,
# config validation and the Ansible role's argument_specs (tests/ansible/test_role_specs.py)
# all read the names from here.
POLICIES: Mapping[str, Callable[[dict[str, Any], float], PolicyChoice]] = {
    "least-used": _least_used,
    "target-load-packing": _target_load_packing,
    "load-variation-risk-balancing": _load_variation,
}
POLICY_NAMES = tuple(POLICIES)


def parse_policy(
    name: str,
    args: Mapping[str, Any] | None = None,
    *,
    spread_weight: float = 0.0,
    peak_sigmas: float = 0.0,
) -> PolicyChoice:
    """The one parser of ``policy`` and ``policy_args``; PolicyError (a ConfigError)
    names the bad argument. ``spread_weight`` (``estimator.spread_weight``) applies to
    least-used only, the policy that scores a workload's share of a node; so does
    ``peak_sigmas`` (``estimator.peak_sigmas``): load-variation risk balancing weighs the
    deviation by its own arguments, and TargetLoadPacking reads the mean, as Trimaran's."""
    parse = POLICIES.get(name)
    if parse is None:
        raise PolicyError(f"unknown policy {name!r}; choose one of {', '.join(POLICY_NAMES)}")
    rest = dict(args or {})
    choice = parse(rest, spread_weight)
    if peak_sigmas and isinstance(choice.policy, LeastUsed):
        peaked = dataclasses.replace(choice.policy, peak_sigmas=peak_sigmas)
        choice = msgspec.structs.replace(choice, policy=peaked)
    # Every policy accepts least-used's weights and ignores them, so switching the policy
    # alone does not turn a config with weights into an error.
    rest.pop("resources", None)
    if rest:
        raise PolicyError(f"policy {name}: unknown policy_args {sorted(rest)}")
    return choice


def make_policy(name: str, args: Mapping[str, Any] | None = None) -> Policy:
    """The scorer alone (``parse_policy``), without the spreading term."""
    return parse_policy(name, args).policy
