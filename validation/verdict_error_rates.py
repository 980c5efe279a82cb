"""How often the verdict recommends a config that is not better (false-recommend rate), and how often it
recommends one that is (power) — the old verdict against the held-out confirmation (tuner/confirm.py).

Setup: a generated trace with timestamps (soundcloud by default), replayed on its own arrival times on a small
cluster whose service rate puts the offered load at `--load`; the current config is `fifo`.

* **A/A (equal in truth).** `--twins` candidates are the current config under another name, each replayed with its
  own random draws (a seed offset), so they are equal in distribution and differ only by noise — what a study's
  many near-equal candidates look like. The study's pick is the twin with the lowest mean p99 over the study's
  seeds; the verdict then judges it against the current config.
* **Power (better in truth).** One candidate: the current config on servers faster by a factor found by bisection
  so that its true p99 gain — measured as the mean over `--truth-seeds` fresh seeds of whole replays — is 10 %,
  20 % and 50 %, replayed with its own random draws like the twins (the same arrivals; a config whose replays
  differ from the current one's in more than a scale, as a scheduler's do).

Verdicts compared, each at one-sided 5 %:
* **before** — the paired t-test across the study's S seeds on per-seed p99 (what `decide` did);
* **after** — the held-out confirmation: fresh seeds, paired batch means pooled over them (`tuner.confirm`).
(The held-out later stretch plays no part here: the arrivals are the whole trace's.) The confirmation is also
run with 3 held-out seeds, to show what the default of 5 buys.

    .venv/bin/python -m validation.verdict_error_rates --reps 60 --power-reps 40
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from simulation import cassandra
from simulation.cassandra import CassandraDeployment, PreparedTrace
from simulation.policies import resolve
from simulation.source import WorkloadSource
from tuner.confirm import HOLDOUT_SEED_BASE, confirm
from tuner.evaluators.base import Evaluator, EvaluatorSpec
from tuner.objective import Metrics, parse_objective
from tuner.recommend import paired_test
from tuner.space import Candidate

OBJECTIVE = parse_objective("p99")
CURRENT = Candidate("fifo")


class Harness(Evaluator):
    """Replays of `fifo` on the trace: a twin `i` with seed offset, or a faster cluster by factor `f`."""

    deployment = "cassandra"

    def __init__(self, source: WorkloadSource, base: CassandraDeployment) -> None:
        self.source = source
        self.base = base
        self.table = source.load()
        self._traces: dict[float, tuple[CassandraDeployment, PreparedTrace]] = {}
        self._fifo = resolve("fifo", {})

    def _at(self, factor: float) -> tuple[CassandraDeployment, PreparedTrace]:
        if factor not in self._traces:
            dep = dataclasses.replace(self.base, service_rate=self.base.service_rate * factor)
            self._traces[factor] = (dep, cassandra.prepare(self.table, dep, source="trace"))
        return self._traces[factor]

    def policies(self) -> tuple[str, ...]:
        return ("fifo",)

    def latencies_ms(self, candidate: Candidate, seed: int) -> npt.NDArray[np.float64]:
        twin = int(candidate.params.get("twin", 0))
        factor = float(candidate.params.get("faster", 1.0))
        dep, trace = self._at(factor)
        res = cassandra.replay(trace, dep, self._fifo, seed + 1_000_003 * twin, classes=False)
        lat = np.asarray(res.latency_ms, dtype=np.float64)
        for key in [k for k in trace._workloads if k[0] == seed + 1_000_003 * twin]:
            del trace._workloads[key]  # one seed's workload at a time: memory stays flat over the repetitions
        return lat

    def p99(self, candidate: Candidate, seed: int) -> float:
        kept = self.latencies_ms(candidate, seed)
        kept = kept[math.floor(self.warmup_fraction() * kept.size):]
        return float(np.percentile(kept, 99))

    def evaluate(self, candidate: Candidate, seed: int, fraction: float = 1.0) -> Metrics:
        p = self.p99(candidate, seed)
        return Metrics(p, p, p, p, p)

    def warmup_fraction(self) -> float:
        return float(self.base.warmup)

    def spec(self) -> EvaluatorSpec:
        return EvaluatorSpec("validation", {})


def _old(h: Harness, cand: Candidate, seeds: Sequence[int]) -> bool:
    c = [h.p99(cand, s) for s in seeds]
    b = [h.p99(CURRENT, s) for s in seeds]
    return sum(c) < sum(b) and paired_test(c, b) < 0.05


def _pick(h: Harness, twins: int, seeds: Sequence[int]) -> Candidate:
    cands = [Candidate("fifo", {"twin": i + 1}) for i in range(twins)]
    return min(cands, key=lambda c: sum(h.p99(c, s) for s in seeds))


def true_gain(h: Harness, factor: float, seeds: Sequence[int]) -> float:
    base = np.mean([h.p99(CURRENT, s) for s in seeds])
    fast = np.mean([h.p99(Candidate("fifo", {"twin": 99, "faster": factor}), s) for s in seeds])
    return float(1.0 - fast / base)


def factor_for(h: Harness, target: float, seeds: Sequence[int]) -> tuple[float, float]:
    lo, hi = 1.0, 4.0
    for _ in range(14):
        mid = (lo + hi) / 2
        if true_gain(h, mid, seeds) < target:
            lo = mid
        else:
            hi = mid
    return hi, true_gain(h, hi, seeds)


def _rate(hits: list[bool]) -> str:
    n, k = len(hits), sum(hits)
    p = k / n if n else float("nan")
    # Wilson 95 % interval
    z = 1.96
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    lo, hi = 100 * max(0.0, centre - half), 100 * min(1.0, centre + half)
    return f"{100 * p:.1f} % ({k}/{n}; 95 % CI {lo:.1f}–{hi:.1f} %)"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="soundcloud")
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--load", type=float, default=0.7)
    ap.add_argument("--servers", type=int, default=16)
    ap.add_argument("--seeds", type=int, default=3, help="study seeds (the old verdict's sample)")
    ap.add_argument("--holdout-seeds", type=int, default=5, help="the confirmation's (tune_confirm_seeds)")
    ap.add_argument("--twins", type=int, default=10, help="A/A candidates the study picks its best from")
    ap.add_argument("--reps", type=int, default=60, help="A/A repetitions")
    ap.add_argument("--power-reps", type=int, default=40)
    ap.add_argument("--truth-seeds", type=int, default=20)
    ap.add_argument("--effects", default="0.1,0.2,0.5")
    args = ap.parse_args(argv)

    source = WorkloadSource(profile=args.profile, requests=args.requests, trace_seed=1)
    probe = CassandraDeployment(servers=args.servers, slots=4, replication=3, use_timestamps=True, load=None,
                                use_sizes=False)
    h = Harness(source, probe)
    offered = cassandra.offered_load(h._at(1.0)[1], probe)
    assert offered is not None
    base = dataclasses.replace(probe, service_rate=probe.service_rate * offered / args.load)
    h = Harness(source, base)
    print(f"# {args.profile}, {args.requests} requests on {args.servers} servers × 4 slots, RF 3, fifo, "
          f"the trace's own arrivals at offered load {args.load} (service rate {base.service_rate:.0f}/s)")
    t0 = time.time()

    def study_seeds(r: int) -> list[int]:
        return [10_000 + 100 * r + i for i in range(args.seeds)]

    def held_seeds(r: int) -> list[int]:
        return [HOLDOUT_SEED_BASE + 100 * r + i for i in range(args.holdout_seeds)]

    aa_old_single, aa_old, aa_new, aa_new_single, aa_new3, aa_new3_single = [], [], [], [], [], []
    for r in range(args.reps):
        seeds = study_seeds(r)
        twin1 = Candidate("fifo", {"twin": 1})
        aa_old_single.append(_old(h, twin1, seeds))
        pick = _pick(h, args.twins, seeds)
        aa_old.append(_old(h, pick, seeds))
        aa_new.append(confirm(h, pick, CURRENT, held_seeds(r), OBJECTIVE).significant)
        aa_new_single.append(confirm(h, twin1, CURRENT, held_seeds(r), OBJECTIVE).significant)
        aa_new3.append(confirm(h, pick, CURRENT, held_seeds(r)[:3], OBJECTIVE).significant)
        aa_new3_single.append(confirm(h, twin1, CURRENT, held_seeds(r)[:3], OBJECTIVE).significant)
        print(f"  A/A rep {r + 1}/{args.reps} ({time.time() - t0:.0f} s)", flush=True)
    print("\n## False-recommend rate, candidates equal in truth (A/A)\n")
    print(f"| verdict | one candidate | best of {args.twins} twins |")
    print("|---|---|---|")
    print(f"| before: paired t-test over {args.seeds} study seeds | {_rate(aa_old_single)} | {_rate(aa_old)} |")
    print(f"| after: held-out confirmation, {args.holdout_seeds} fresh seeds, paired batch means (AR(1)) | "
          f"{_rate(aa_new_single)} | {_rate(aa_new)} |")
    print(f"| after, 3 fresh seeds | {_rate(aa_new3_single)} | {_rate(aa_new3)} |")

    truth = [90_000 + i for i in range(args.truth_seeds)]
    print(f"\n## Power, a candidate truly better (truth: mean p99 over {args.truth_seeds} fresh seeds)\n")
    print(f"| target gain | true p99 gain | before ({args.seeds} seeds) | after ({args.holdout_seeds} held-out "
          "seeds) | after (3 held-out seeds) |")
    print("|---|---|---|---|---|")
    for target in (float(x) for x in args.effects.split(",")):
        factor, gain = factor_for(h, target, truth)
        cand = Candidate("fifo", {"twin": 99, "faster": factor})
        old, new, new3 = [], [], []
        for r in range(args.power_reps):
            old.append(_old(h, cand, study_seeds(r)))
            new.append(confirm(h, cand, CURRENT, held_seeds(r), OBJECTIVE).significant)
            new3.append(confirm(h, cand, CURRENT, held_seeds(r)[:3], OBJECTIVE).significant)
        print(f"| {100 * target:.0f} % | {100 * gain:.1f} % (servers ×{factor:.3f}) | {_rate(old)} | {_rate(new)} | "
              f"{_rate(new3)} |", flush=True)
    print(f"\n({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
