"""Sampling error, measured: the sampled study against the full replay, per workload, fraction and window seed.

For each workload a trace is generated (`diurnal` non-stationary; `soundcloud`, `facebook` stationary) and
replayed with its own timestamps on the Cassandra evaluator. One full study (the whole trace) gives the
reference winner; then, per fraction F and window seed, a study on the sampled trace (`tailtune tune
--sample-fraction F --sample-seed S`, same trials, replay seeds and sampler seed). Reported per sampled study:

- winner agreement: the sampled winner's policy equals the full winner's (and the same parameters);
- p50 / p99 error: the recommendation's estimate for the whole trace (`sampling.estimate`, tuner/peak_check.py:
  the burst stretches and the sample's windows as two strata) against the recommended config (the sampled
  winner, or the current config when it is kept) replayed on the whole trace (same replay seeds), in % of the
  full figure: what the recommendation's numbers get wrong; and the error of the sample's own p99;
- regret: the sampled winner's full-replay objective against the full winner's, in %: what picking on a sample
  costs;
- the peak check (tuner/peak_check.py): how many of the sample's best candidates stormed over the burst stretches,
  whether that changed the pick, and the regret of the pick without the check (the sample's best, replayed whole).

A workload is a generator profile, optionally with options: `diurnal:bursts=2:burst_s=60`. `--cache DIR` keeps
each workload's full study and full replays (keyed by the arguments and the simulator's model version), so a
re-run measures only the samples.

    .venv/bin/python -m validation.sampling --requests 3000000 --trials 30 --seeds 2 \\
        --fractions 0.05,0.1,0.25 --sample-seeds 0,1 --cache /tmp/sampling-cache --out /tmp/sampling.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from base.settings import get_settings
from ingest.generate import make_profile, parse_option_strings, write_trace
from ingest.profiles.base import Profile
from simulation.source import WorkloadSource
from tuner.evaluators import EvaluatorSpec, build_evaluator
from tuner.objective import parse_objective
from tuner.sampling import SamplingSpec
from tuner.space import Candidate
from tuner.study import evaluate_candidate
from tuner.tune import TuneRequest, run_tune

__all__ = ["main", "run_workload"]

WORKLOADS = ("diurnal", "soundcloud", "facebook")


def _tune(trace: Path, args: argparse.Namespace, sampling: SamplingSpec | None) -> tuple[dict[str, Any], float]:
    req = TuneRequest(
        source=WorkloadSource(trace=str(trace)), deployment="cassandra", trials=args.trials, seeds=args.seeds,
        jobs=args.jobs, storage="memory", mlflow=False, plots=False, sampling=sampling, server=args.server,
        alternative_trials=0, evaluator_options={"use_timestamps": True, "load": args.load},
    )  # fmt: skip
    t0 = time.perf_counter()
    doc = run_tune(req).to_json()
    return doc, time.perf_counter() - t0


def _winner(doc: dict[str, Any]) -> Candidate:
    best = doc["best"] or doc["baseline"]
    return Candidate(best["policy"], dict(best.get("params", {})))


def _profile(workload: str) -> Profile[Any]:
    """`diurnal:bursts=2:burst_s=60`: the profile with those options (as `tailtune generate --option`)."""
    name, *options = workload.split(":")
    return make_profile(name, parse_option_strings([item for item in options if item.strip()]))


def _peak_p99(check: dict[str, Any], cand: Candidate) -> float | None:
    """The p99 over the burst stretches of `cand`, if the peak check replayed it."""
    return next((r["peak_p99_ms"] for r in check["checked"] + check["references"]
                 if Candidate(r["policy"], dict(r["params"])).key() == cand.key()), None)  # fmt: skip


def _err(est: float, full: float) -> float:
    return 100.0 * (est - full) / full


def run_workload(workload: str, args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    import kvsim

    trace = work / f"{re.sub(r'[^A-Za-z0-9_.=-]+', '_', workload)}-n{args.requests}.parquet"
    write_trace(trace, _profile(workload), args.requests, args.trace_seed)
    key = json.dumps([workload, args.requests, args.trials, args.seeds, args.load, args.trace_seed, args.server,
                      kvsim.model_version()])  # fmt: skip
    cache_file = (args.cache / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json") if args.cache else None
    cache: dict[str, Any] = json.loads(cache_file.read_text()) if cache_file and cache_file.is_file() else {}
    if "full" not in cache:
        cache["full"], cache["full_s"], cache["replays"] = *_tune(trace, args, None), {}
    full, full_s = cache["full"], cache["full_s"]
    winner = _winner(full)
    ev = build_evaluator(EvaluatorSpec("kvsim-cassandra", {"source": {"trace": str(trace)}, "use_timestamps": True,
                                                           "load": args.load}))  # fmt: skip
    seeds = tuple(range(args.seeds))
    objective = parse_objective("p99")
    full_of: dict[str, dict[str, float]] = cache["replays"]
    full_of[winner.label()] = full["best"] or full["baseline"]

    def whole(cand: Candidate) -> dict[str, float]:
        if cand.label() not in full_of:
            full_of[cand.label()] = evaluate_candidate(ev, cand, seeds, objective)["metrics"]
            if cache_file is not None:
                cache_file.parent.mkdir(parents=True, exist_ok=True)
                cache_file.write_text(json.dumps(cache))
        return full_of[cand.label()]

    if cache_file is not None:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        cache_file.write_text(json.dumps(cache))
    best_p99 = full_of[winner.label()]["p99_ms"]
    rows = [{"workload": workload, "fraction": 1.0, "sample_seed": None, "winner": winner.label(),
             "p50_ms": full_of[winner.label()]["p50_ms"], "p99_ms": best_p99,
             "wall_s": full_s, "replayed_fraction": 1.0}]  # fmt: skip
    print(json.dumps(rows[-1]), flush=True)
    for fraction in args.fractions:
        for sseed in args.sample_seeds:
            doc, wall = _tune(trace, args, SamplingSpec(fraction=fraction, strata=args.strata, seed=sseed))
            cand = _winner(doc)
            ref, est = whole(cand), doc["best"] or doc["baseline"]
            chosen = Candidate(doc["policy"], dict(doc["params"]))
            truth, estimate = whole(chosen), doc["sampling"]["estimate"]
            check = doc["sampling"]["peak_check"]
            first = next((c for c in check["checked"] if not c["current"]), None)
            unchecked = Candidate(first["policy"], dict(first["params"])) if first is not None else cand
            row = {
                "workload": workload, "fraction": fraction, "sample_seed": sseed, "winner": cand.label(),
                "replayed_fraction": doc["replayed_fraction"], "load_factor": doc["sampling"]["load_factor"],
                "same_policy": cand.policy == winner.policy, "same_winner": cand.label() == winner.label(),
                "p50_err_pct": _err(estimate["p50_ms"], truth["p50_ms"]),
                "p99_err_pct": _err(estimate["p99_ms"], truth["p99_ms"]),
                "p99_sample_err_pct": _err(doc["expected"]["p99_ms"], truth["p99_ms"]),
                "regret_pct": 100.0 * (ref["p99_ms"] - best_p99) / best_p99,
                "peak_rejected": check["rejected"], "peak_changed": unchecked.key() != cand.key(),
                "regret_unchecked_pct": 100.0 * (whole(unchecked)["p99_ms"] - best_p99) / best_p99,
                "current_storms": check["current_storms"], "verdict": doc["verdict"],
                "peak_p99_ms": _peak_p99(check, cand), "sample_p99_ms": est["p99_ms"], "full_p99_ms": ref["p99_ms"],
                "estimate": estimate, "recommended": chosen.label(), "recommended_full": truth,
                "wall_s": wall,
            }  # fmt: skip
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    out = ["| workload | F | window seeds | replayed | same policy | same winner | p50 err % (mean, worst) "
           "| p99 err % (mean, worst) | sample's own p99 err % (worst) | regret % (worst) "
           "| peak check: changed the pick | regret without it % (worst) | wall s (mean) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for w in dict.fromkeys(r["workload"] for r in rows):
        full = next(r for r in rows if r["workload"] == w and r["fraction"] == 1.0)
        out.append(f"| {w} | 1 (full) | – | 1.000 | winner {full['winner']} | | p50 {full['p50_ms']:.3f} ms "
                   f"| p99 {full['p99_ms']:.3f} ms | | | | | {full['wall_s']:.0f} |")
        for f in dict.fromkeys(r["fraction"] for r in rows if r["workload"] == w and r["fraction"] < 1.0):
            rs = [r for r in rows if r["workload"] == w and r["fraction"] == f]
            n = len(rs)

            def stat(key: str, rs: list[dict[str, Any]] = rs) -> str:
                vals = [r[key] for r in rs]
                worst = max(vals, key=abs)
                return f"{sum(vals) / len(vals):+.1f}, {worst:+.1f}"

            out.append(
                f"| {w} | {f:g} | {n} | {sum(r['replayed_fraction'] for r in rs) / n:.3f} "
                f"| {sum(r['same_policy'] for r in rs)}/{n} | {sum(r['same_winner'] for r in rs)}/{n} "
                f"| {stat('p50_err_pct')} | {stat('p99_err_pct')} "
                f"| {max((r.get('p99_sample_err_pct', r['p99_err_pct']) for r in rs), key=abs):+.1f} "
                f"| {max(r['regret_pct'] for r in rs):+.1f} "
                f"| {sum(r.get('peak_changed', False) for r in rs)}/{n} "
                f"| {max(r.get('regret_unchecked_pct', r['regret_pct']) for r in rs):+.1f} "
                f"| {sum(r['wall_s'] for r in rs) / n:.0f} |"
            )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--requests", type=int, default=1_000_000)
    p.add_argument("--trials", type=int, default=30)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--load", type=float, default=0.5)
    p.add_argument("--strata", type=int, default=10)
    p.add_argument("--trace-seed", type=int, default=1)
    p.add_argument("--fractions", default="0.05,0.1,0.25")
    p.add_argument("--sample-seeds", default="0,1,2")
    p.add_argument("--server", default="stock", help="The Cassandra server kind tuned (stock, rein-patched).")
    p.add_argument("--cache", type=Path, default=None, help="Keep full studies and replays here across runs.")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--table", type=Path, default=None, help="Only print the table of a saved --out file.")
    args = p.parse_args(argv)
    if args.table is not None:
        print(_table(json.loads(args.table.read_text())))
        return
    args.fractions = [float(x) for x in args.fractions.split(",")]
    args.sample_seeds = [int(x) for x in args.sample_seeds.split(",")]
    get_settings()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="sampling-") as tmp:
        for workload in args.workloads.split(","):
            rows += run_workload(workload, args, Path(tmp))
            if args.out is not None:
                args.out.write_text(json.dumps(rows, indent=1))
    print(_table(rows))


if __name__ == "__main__":
    main()
