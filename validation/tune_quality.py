"""Tuned rein vs the exhaustive K × R × rate_step grid: how close the tuner gets, and with how many evaluations.

For each profile: the rein space (k 2..8, range_factor 1.5..6 step 0.5, rate_step 0..2 step 0.5, r_q1 = 5 and
tau_1 = 1 fixed; infeasible rate combinations left out), every grid point replayed on the same seeds as the
study (common random numbers, 2 processes), then a TPE study with a budget of at most a quarter of the grid's
points. Reports the grid best, the tuned best (same seeds, so directly comparable), the gap and the
evaluations each used.

    .venv/bin/python -m validation.tune_quality --requests 200000 --profiles soundcloud,facebook
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from typing import Any

from tuner.evaluators import EvaluatorSpec, build_evaluator
from tuner.kinds import space_for
from tuner.objective import parse_objective
from tuner.space import Candidate, apply_overrides
from tuner.study import StudyConfig, evaluate_candidate, run_study

SPACE: dict[str, dict[str, Any]] = {
    "rein.k": {"low": 2, "high": 8},
    "rein.range_factor": {"low": 1.5, "high": 6.0, "step": 0.5},
    "rein.rate_step": {"low": 0.0, "high": 2.0, "step": 0.5},
    "rein.tau_1": {"fixed": 1.0},
}
_EV: Any = None


def _init(spec: dict[str, Any]) -> None:
    global _EV
    _EV = build_evaluator(EvaluatorSpec.from_dict(spec))


def _grid_point(args: tuple[dict[str, Any], list[int]]) -> tuple[dict[str, Any], float]:
    cand, seeds = args
    res = evaluate_candidate(_EV, Candidate.from_dict(cand), seeds, parse_objective("p99"))
    return cand, float(res["values"][0])


def bench(profile: str, requests: int, seeds: list[int], storage: str, jobs: int, load: float) -> dict[str, Any]:
    spec = EvaluatorSpec("kvsim-cassandra", {"source": {"profile": profile, "requests": requests}, "load": load})
    space = apply_overrides(space_for("cassandra"), SPACE, policies=["rein"])
    grid = [c.as_dict() for c in space.grid()]
    t0 = time.time()
    with multiprocessing.get_context("spawn").Pool(jobs, initializer=_init, initargs=(spec.as_dict(),)) as pool:
        results = pool.map(_grid_point, [(c, seeds) for c in grid], chunksize=4)
    grid_s = time.time() - t0
    best_c, best_v = min(results, key=lambda r: r[1])
    budget = len(grid) // 4
    config = StudyConfig(name=f"bench-quality-{profile}-{requests}-{load}", storage=storage, evaluator=spec,
                         space=space, objective=parse_objective("p99"), seeds=tuple(seeds), trials=budget,
                         startup_trials=10)
    t0 = time.time()
    out = run_study(config, jobs=jobs)
    tune_s = time.time() - t0
    trials = out.study.get_trials(deepcopy=False)
    done = [t for t in trials if t.state.name == "COMPLETE"]
    tuned = min(done, key=lambda t: t.values[0])
    full = sum(1 for t in trials if "per_seed" in t.user_attrs and "cached_from" not in t.user_attrs)
    stopped = [t for t in trials if "prefix_metrics" in t.user_attrs and "per_seed" not in t.user_attrs]
    prefix_only = sum(1 for t in stopped if "first_seed_metrics" not in t.user_attrs)
    first_seed_only = len(stopped) - prefix_only
    return {
        "profile": profile, "requests": requests, "load": load, "seeds": seeds,
        "grid_points": len(grid), "grid_evaluations": len(grid), "grid_wall_s": round(grid_s, 1),
        "grid_best": {"candidate": best_c, "p99_ms": best_v},
        "budget_trials": budget, "trials": len(trials),
        "tuner_full_evaluations": full, "tuner_prefix_only": prefix_only,
        "tuner_first_seed_only": first_seed_only,
        "tuner_replays": round(sum(float(t.user_attrs.get("replays", 0)) for t in trials), 2),
        "grid_replays": len(grid) * len(seeds),
        "tuned_best": {"candidate": tuned.user_attrs["candidate"], "p99_ms": float(tuned.values[0])},
        "gap_pct": round((float(tuned.values[0]) / best_v - 1.0) * 100.0, 3),
        "tune_wall_s": round(tune_s, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--profiles", default="soundcloud,facebook")
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--storage", default="/tmp/tailtune-bench-quality.log")
    ap.add_argument("--load", type=float, default=0.75, help="offered load (fraction of total capacity)")
    a = ap.parse_args()
    for p in a.profiles.split(","):
        print(json.dumps(bench(p, a.requests, list(range(a.seeds)), a.storage, a.jobs, a.load)), flush=True)


if __name__ == "__main__":
    main()
