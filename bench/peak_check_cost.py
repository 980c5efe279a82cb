"""What stopping the replays of storming candidates saves the peak check: the check with whole replays and with
the stop rule, side by side in one process, on the same burst stretches.

    python -m bench.peak_check_cost --profile diurnal --requests 3000000 --fraction 0.05 --seeds 2

The trace is generated as `validation.sampling` does (trace seed 1), its burst stretches are written as a sampled
tune writes them (`tuner.sampling.peak_source`, F = `--fraction`) and replayed at their absolute rate
(`--use-timestamps`, load `--load` × their load factor). The sample's ranking is a fixed stand-in for a study's
(on the bursty traces of docs/sampling.md the sample's best all hedge): speculative retry `ALWAYS`, `50p`, 3
driver executions 5 ms apart, `90p`, then `NEVER`; the current config is the stock defaults (`99p`). One
untimed replay of the current config first prepares the trace; then the check with every replay whole, then
with the stop rule (in that order: the second has no cache the first lacked). Prints both walls, their ratio,
the replays each made and whether they decided the same.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["RANKING", "main"]

#: The stand-in ranking (stock knobs over the java4 driver's defaults), best first.
RANKING: tuple[dict[str, Any], ...] = (
    {"speculative_retry": "ALWAYS"},
    {"speculative_retry": "50p"},
    {"driver.speculative_execution.max_executions": 3, "driver.speculative_execution.delay": 5.0},
    {"speculative_retry": "90p"},
    {"speculative_retry": "NEVER"},
)


class _Counting:
    """Counts the replays an evaluator makes, whole or stopped."""

    def __init__(self, ev: Any) -> None:
        self.ev, self.whole, self.stopped = ev, 0, 0

    def evaluate(self, cand: Any, seed: int, fraction: float = 1.0) -> Any:
        self.whole += 1
        return self.ev.evaluate(cand, seed, fraction)

    def evaluate_below(self, cand: Any, seed: int, p99_ms: float) -> Any:
        m = self.ev.evaluate_below(cand, seed, p99_ms)
        if m is None:
            self.stopped += 1
        else:
            self.whole += 1
        return m


class _Whole(_Counting):
    def evaluate_below(self, cand: Any, seed: int, p99_ms: float) -> Any:
        return self.evaluate(cand, seed)


def main(argv: list[str] | None = None) -> None:
    import optuna

    from base.settings import get_settings
    from ingest.generate import make_profile, write_trace
    from simulation.source import WorkloadSource
    from tuner import sampling
    from tuner.evaluators import EvaluatorSpec, build_evaluator
    from tuner.objective import parse_objective
    from tuner.peak_check import PeakStretch, check
    from tuner.space import Candidate
    from tuner.tune import stock_defaults

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="diurnal")
    ap.add_argument("--requests", type=int, default=3_000_000)
    ap.add_argument("--fraction", type=float, default=0.05)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--load", type=float, default=0.5)
    ap.add_argument("--work", type=Path, default=None, help="where the trace is written (default: a temp dir)")
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="peak-cost-"))
    work.mkdir(parents=True, exist_ok=True)
    trace = work / f"{args.profile}-n{args.requests}.parquet"
    if not trace.exists():
        write_trace(trace, make_profile(args.profile), args.requests, 1)
    path, info = sampling.peak_source(WorkloadSource(trace=str(trace)), args.fraction, get_settings())
    opts = {"use_timestamps": True, "load": args.load * info.load_factor}
    stretch = PeakStretch(str(path), tuple((w.start, w.end) for w in info.windows), info.requests,
                          info.replayed_fraction, opts, info.load_factor)  # fmt: skip
    current = stock_defaults("java4")
    trials = []
    for i, params in enumerate(RANKING):
        cand = Candidate("stock", {**current.params, **params})
        t = optuna.trial.create_trial(value=float(i + 1), user_attrs={"candidate": cand.as_dict(),
                                                                      "metrics": {"p99_ms": float(i + 1)}})  # fmt: skip
        t.number = i
        trials.append(t)
    ev = build_evaluator(EvaluatorSpec("kvsim-cassandra", {"source": {"trace": str(path)}, **opts}))
    ev.evaluate(current, 0)  # prepares the trace (untimed)
    seeds, objective = tuple(range(args.seeds)), parse_objective("p99")
    out: dict[str, Any] = {"requests": info.requests, "load_factor": info.load_factor}
    blocks = {}
    for name, wrap in (("whole", _Whole(ev)), ("stop", _Counting(ev))):
        t0 = time.perf_counter()
        res = check(wrap, stretch, trials, objective, current, seeds)  # type: ignore[arg-type]
        wall = time.perf_counter() - t0
        blocks[name] = res.block
        out[name] = {"wall_s": round(wall, 1), "whole_replays": wrap.whole, "stopped_replays": wrap.stopped,
                     "floor_p99_ms": res.block["floor_p99_ms"], "picked_rank": res.block["picked_rank"],
                     "rejected": res.block["rejected"]}  # fmt: skip
        print(name, json.dumps(out[name]), flush=True)
    keys = ("floor_p99_ms", "picked_rank", "picked_twin", "current_storms", "rejected")
    out["same_decisions"] = all(blocks["whole"][k] == blocks["stop"][k] for k in keys) and [
        r["storms"] for r in blocks["whole"]["checked"]] == [r["storms"] for r in blocks["stop"]["checked"]]
    out["ratio_whole_over_stop"] = round(out["whole"]["wall_s"] / max(out["stop"]["wall_s"], 1e-9), 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
