"""The recommendation: what `tailtune tune --json` prints, what a nightly job stores and decides on, and what
the service publishes — one typed object with its JSON form (`to_json` / `from_json`).

It records the deployment it was tuned for (`tuned_for`: the trace source, the simulated cluster, load,
warm-up and the replay seeds) and, per seed, the figures behind `expected` (`expected.per_seed`) together with
the `tailtune simulate` command that reproduces each of them exactly (`reproduce`).

`accept` is the deployment-side decision on a recommendation (the tuner's `decide` is the statistical one);
both live in the tuner so that the jobs and the service only consume them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Recommendation", "accept"]

_METRICS = ("p50_ms", "p95_ms", "p99_ms", "p999_ms", "mean_ms")


@dataclass(frozen=True)
class Recommendation:
    """A finished tuning job's answer (field names are the `tune --json` keys; see docs/tuner.md)."""

    policy: str
    params: dict[str, Any]
    verdict: str
    reason: str
    expected: dict[str, Any]
    baseline: dict[str, Any]
    p_value: float | None = None
    improvement_pct: float | None = None
    best: dict[str, Any] | None = None
    paper_default: dict[str, Any] = field(default_factory=dict)
    objective: str = "p99"
    constraints: list[str] = field(default_factory=list)
    trials: int = 0
    trial_states: dict[str, int] = field(default_factory=dict)
    replays: float = 0.0
    study: str = ""
    storage: str = ""
    deployment: str = ""
    source: str = ""
    policies_not_replayable: list[str] = field(default_factory=list)
    fanout: dict[str, Any] | None = None
    wall_s: float = 0.0
    render: dict[str, Any] = field(default_factory=dict)
    mlflow_run_id: str | None = None
    tuned_for: dict[str, Any] = field(default_factory=dict)
    reproduce: list[str] = field(default_factory=list)
    pareto_front: list[dict[str, Any]] | None = None
    #: Cassandra: the server kind tuned for (`stock` or `rein-patched`); None for memcached.
    server: str | None = None
    #: Cassandra: `{stock: {...}, patched: {...}}`, each server kind's best with its figures, CI and verdict.
    alternatives: dict[str, Any] | None = None
    #: requests replayed / requests in the trace (1.0: the whole trace); `sampling` says how (None: whole trace)
    replayed_fraction: float = 1.0
    sampling: dict[str, Any] | None = None
    #: The held-out confirmation the verdict was decided on (tuner/confirm.py): `{seeds, holdout, method,
    #: improvement_pct, interval_pct, p_value, min_detectable_pct, ...}`; None when nothing was confirmed (no best,
    #: the best is the current config, a constraint failed).
    confirmation: dict[str, Any] | None = None
    #: The latency CDFs behind the verdict (`TuneRequest.cdf_points`; `{seed, warmup, curves: [{name, label,
    #: policy, latency_ms, cdf}]}`); None when not asked for.
    cdfs: dict[str, Any] | None = None

    @property
    def recommends(self) -> bool:
        return self.verdict == "recommend"

    def config(self) -> dict[str, Any]:
        """The config version a deployment stores when it accepts this recommendation."""
        return {"policy": self.policy, "params": dict(self.params), "target": self.render}

    def to_json(self) -> dict[str, Any]:
        optional = ("pareto_front", "server", "alternatives", "cdfs")
        out = {k: v for k, v in self.__dict__.items() if k not in optional}
        for k in optional:
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Recommendation:
        """From a `to_json()` document (keys it does not know are ignored; missing optional ones default)."""
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in names})


def accept(
    rec: Recommendation, constraints: Mapping[str, Any], objective: Mapping[str, Any] | None = None
) -> tuple[bool, str]:
    """The deployment's decision: the tuner must say `recommend`; the expected objective metric must beat the
    current config's (`baseline`) by at least `objective.min_improvement` (relative); the expected p50/p99
    must meet the deployment's limits; the policy must be allowed.
    """
    if not rec.recommends:
        return False, f"tuner verdict is {rec.verdict!r}: {rec.reason}".rstrip(": ")
    objective = objective or {}
    metric_key = f"{objective.get('metric', 'p99')}_ms"
    need = float(objective.get("min_improvement", 0.0))
    base = rec.baseline.get(metric_key)
    new = rec.expected.get(metric_key)
    if need > 0 and base is not None and new is not None and float(base) > 0:
        gain = (float(base) - float(new)) / float(base)
        if gain < need:
            return False, f"{metric_key} improves by {gain:.1%}, less than the required {need:.1%}"
    for metric, limit in (("p50_ms", constraints.get("max_p50_ms")), ("p99_ms", constraints.get("max_p99_ms"))):
        if limit is not None and float(rec.expected.get(metric, float("inf"))) > float(limit):
            return False, f"expected {metric} {rec.expected.get(metric)} exceeds the limit {limit}"
    allowed = constraints.get("policies")
    if allowed and rec.policy not in allowed:
        return False, f"policy {rec.policy!r} is not among the allowed {allowed}"
    return True, "tuner recommends it and it meets the constraints"
