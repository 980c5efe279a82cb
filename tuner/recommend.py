"""From a finished study to a recommendation: best trial, references, verdict, rendering for the target.

- **Best trial**: single objective — the complete trial with the lowest mean objective among those meeting
  the constraints; multi-objective — among the feasible Pareto-front trials, the one with the lowest first
  objective (the Pareto front itself is reported).
- **References** replayed through the same evaluator and seeds: the user's current config (baseline; default
  fifo for Cassandra, batching for memcached), the paper default (Rein K=4, R=3, r_q1=5, rate_step=1, τ1=1 for
  Cassandra; Chisel's analyzer levels for memcached) — each kind's, `tuner.kinds`.
- **Verdict**: a tune decides it on held-out replays (`tuner/confirm.py`, docs/tuner.md § References and
  verdict). `decide` here is the same rule on the study's own seeds (a one-sided paired t-test over the common
  seeds, or over one replay's batch means): (a) the best differs from the current config, (b) its first
  objective is lower on average with p < `alpha` (default 0.05; with zero spread, all seeds must improve), and
  (c) every constraint holds; otherwise `keep current` with the reason.
- **Rendering**: a Cassandra config block (JSON + the `key=value` lines a Rein-patched node reads) and a
  memcached client config JSON (each kind's renderer, `tuner.kinds.render`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.objective import Metrics, Objective
from tuner.space import Candidate

__all__ = [
    "Verdict",
    "decide",
    "paired_test",
    "pareto_front",
    "pick_best",
    "rank_trials",
    "render_cassandra",
    "render_memcached",
]

def _feasible(t: Any) -> bool:
    return all(float(c) <= 0 for c in t.user_attrs.get("constraints", []))


def pareto_front(trials: Sequence[Any]) -> list[Any]:
    """Complete trials no other complete trial dominates (all objectives minimized)."""
    done = [t for t in trials if t.state.name == "COMPLETE" and t.values]
    front = []
    for t in done:
        dominated = any(
            all(a <= b for a, b in zip(o.values, t.values, strict=True))
            and any(a < b for a, b in zip(o.values, t.values, strict=True))
            for o in done
        )
        if not dominated:
            front.append(t)
    return sorted(front, key=lambda t: t.number)


def rank_trials(trials: Sequence[Any], objective: Objective) -> list[Any]:
    """The trials a recommendation is picked from, best first: the complete ones (the Pareto front with several
    objectives) that meet the constraints, by first objective value, then trial number."""
    pool = pareto_front(trials) if objective.multi else [t for t in trials if t.state.name == "COMPLETE"]
    return sorted((t for t in pool if t.values and _feasible(t)), key=lambda t: (float(t.values[0]), t.number))


def pick_best(trials: Sequence[Any], objective: Objective) -> Any | None:
    """The recommended trial (see the module docstring); None when no complete trial meets the constraints."""
    ranked = rank_trials(trials, objective)
    return ranked[0] if ranked else None


def paired_test(candidate: Sequence[float], baseline: Sequence[float]) -> float:
    """One-sided p-value that the candidate's per-seed values are lower than the baseline's (paired t-test).

    Zero spread of the differences: p = 0 when every seed improves, else 1. One seed: p = 0 if it improves
    (no test possible; the verdict then says the evidence is one seed).
    """
    if len(candidate) != len(baseline) or not candidate:
        raise ValueError("paired test needs two equal-length non-empty samples")
    diffs = [c - b for c, b in zip(candidate, baseline, strict=True)]
    n = len(diffs)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1)) if n > 1 else 0.0
    if n == 1 or sd == 0.0:
        return 0.0 if all(d < 0 for d in diffs) else 1.0
    from scipy import stats

    return float(stats.t.cdf(mean / (sd / math.sqrt(n)), n - 1))


@dataclass(frozen=True, slots=True)
class Verdict:
    recommend: bool
    reason: str
    p_value: float | None
    improvement_pct: float | None

    @property
    def label(self) -> str:
        return "recommend" if self.recommend else "keep current"


def decide(
    best: Candidate | None,
    best_per_seed: Sequence[float] | None,
    best_metrics: Metrics | None,
    baseline: Candidate,
    baseline_per_seed: Sequence[float],
    baseline_metrics: Metrics,
    objective: Objective,
    *,
    alpha: float = 0.05,
    paired: tuple[Sequence[float], Sequence[float]] | None = None,
) -> Verdict:
    """The verdict on `best` vs the user's current config (see the module docstring).

    `paired`: (candidate, baseline) samples for the test instead of the per-seed values — the batch means of
    one replay when there is one seed (tuner/evidence.py); with one seed and no batches nothing is recommended.
    """
    if best is None or best_per_seed is None or best_metrics is None:
        return Verdict(False, "no trial met the constraints", None, None)
    if best.key() == baseline.key():
        return Verdict(False, "the current config is already the best found", None, 0.0)
    b = sum(baseline_per_seed) / len(baseline_per_seed)
    c = sum(best_per_seed) / len(best_per_seed)
    impr = (b - c) / b * 100.0 if b > 0 else None
    violated = objective.violated(best_metrics, baseline_metrics)
    if violated:
        return Verdict(False, f"constraint(s) violated vs current: {', '.join(violated)}", None, impr)
    label = objective.labels[0]
    if paired is None and len(best_per_seed) == 1:
        return Verdict(False, "one replay too short to estimate an interval (fewer than 100 measured requests): "
                              "use more --seeds or a longer trace", None, impr)
    cand_s, base_s = paired if paired is not None else (best_per_seed, baseline_per_seed)
    over = (f"{len(cand_s)} batches of one replay" if paired is not None else f"{len(cand_s)} seeds")
    p = paired_test(cand_s, base_s)
    if c >= b:
        return Verdict(False, f"no improvement of {label} over the current config", p, impr)
    if p >= alpha:
        return Verdict(
            False,
            f"{label} improvement of {impr:.1f}% is not significant across {over} "
            f"(paired t-test p={p:.3f} >= {alpha})",
            p, impr,
        )
    return Verdict(True, f"{label} {impr:.1f}% lower than current, paired t-test p={p:.3g} over {over}", p, impr)


# ------------------------------------------------------------------------------------------------ rendering
#: Tuner parameter name → key a Rein-patched Cassandra node reads (under `scheduler.<policy>.`).
CASSANDRA_KEYS = {
    "k": "queues",
    "range_factor": "range_factor",
    "r_q1": "rate_q1",
    "rate_step": "rate_step",
    "tau_1": "tau_1",
    "boost_after_ms": "boost_after_ms",
    "thr_l_bytes": "thr_l_bytes",
    "tl_scale": "tl_scale",
    "ts_scale": "ts_scale",
    "queue": "queue_discipline",
}


def _clean(v: Any) -> Any:
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def render_cassandra(cand: Candidate) -> dict[str, Any]:
    """Cassandra: `request_scheduler` block (JSON) and the `scheduler.*` key/values of a Rein-patched node. The
    stock knobs a candidate carries (`driver`, `speculative_retry`, ...) are no scheduler options: they are
    rendered apart (`simulation.stock_render`)."""
    from simulation.stock import COORDINATOR_KNOBS

    scheduler = {k: v for k, v in cand.params.items() if k not in COORDINATOR_KNOBS}
    options = {CASSANDRA_KEYS.get(k, k): _clean(v) for k, v in sorted(scheduler.items())}
    props = [f"scheduler.policy={cand.policy}"]
    props += [f"scheduler.{cand.policy}.{k}={v}" for k, v in options.items()]
    return {
        "json": {"request_scheduler": cand.policy, "request_scheduler_options": options},
        "properties": "\n".join(props) + "\n",
    }


def render_memcached(cand: Candidate) -> dict[str, Any]:
    """memcached client config: batching, or chisel with its split/merge levels — complete (every level the
    client applies, defaults from kvsim's registry included), since the client carries no defaults of its own."""
    import kvsim

    cfg: dict[str, Any] = {"mode": cand.policy}
    cfg.update({k: _clean(v) for k, v in sorted(cand.params.items())})
    if cand.policy == "chisel":
        defaults = next(s for s in kvsim.memcached_policy_specs() if s.name == "chisel").defaults()
        for k in ("merge", "elephant_threshold"):
            cfg.setdefault(k, int(defaults[k]))
    return {"json": {"memcached_client": cfg}}


def metrics_block(cand: Candidate, m: Mapping[str, Any]) -> dict[str, Any]:
    """`{policy, params, p50_ms, p95_ms, p99_ms, ...}` for the JSON document."""
    return {"policy": cand.policy, "params": {k: _clean(v) for k, v in cand.params.items()}, **dict(m)}
