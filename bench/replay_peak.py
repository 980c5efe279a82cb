"""What one whole replay of a tuner candidate holds: the peak RSS above the process's RSS before the replay.

    python -m bench.replay_peak --requests 1000000 --candidate A

The tuner's Cassandra evaluator prepares the soundcloud trace and materializes seed 0 (a plain `fifo` replay),
then the peak RSS is reset (`/proc/self/clear_refs` 5) and the candidate replayed on seed 0. Prints the RSS
before, the peak, their difference (the replay's own state plus the pages of the workload it touches that the
plain replay had not), the replay's wall time and p99. Candidates (the kinds the rein-patched
search replays; A–E with Cassandra's driver knobs):

- A: `replica` = `brb-equalmax` queues + `c3`, `MAX(90p,5ms)`, 2 driver executions 100 ms apart, chunks of 64
- B: A with chunks of 1 key; C: A with chunks of 16; D: A with `least-outstanding`; E: A with `NEVER`
- F: `fifo` + `99p`; G: `rein` + `99p`; H: `fifo` (the plain loop)

Run it once per candidate, each in a fresh process (the peak is the process's).
"""

from __future__ import annotations

import argparse
import gc
import time
from typing import Any

__all__ = ["CANDIDATES", "main"]

_A: dict[str, Any] = {"queue": "brb-equalmax", "replica": "c3", "speculative_retry": "MAX(90p,5ms)",
                      "driver.speculative_execution.max_executions": 2, "driver.speculative_execution.delay": 100,
                      "multiget.chunk": 64}
#: name → (policy, params)
CANDIDATES: dict[str, tuple[str, dict[str, Any]]] = {
    "A": ("replica", _A),
    "B": ("replica", {**_A, "multiget.chunk": 1}),
    "C": ("replica", {**_A, "multiget.chunk": 16}),
    "D": ("replica", {**_A, "replica": "least-outstanding"}),
    "E": ("replica", {**_A, "speculative_retry": "NEVER"}),
    "F": ("fifo", {"speculative_retry": "99p"}),
    "G": ("rein", {"speculative_retry": "99p"}),
    "H": ("fifo", {}),
}


def _status_mib(key: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    raise KeyError(key)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--candidate", choices=sorted(CANDIDATES), default="A")
    a = ap.parse_args(argv)
    from tuner.evaluators import EvaluatorSpec, build_evaluator
    from tuner.space import Candidate

    ev = build_evaluator(EvaluatorSpec("kvsim-cassandra", {"source": {"profile": "soundcloud",
                                                                      "requests": a.requests, "trace_seed": 1}}))
    ev.evaluate(Candidate("fifo", {}), 0)
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status_mib("VmRSS")
    policy, params = CANDIDATES[a.candidate]
    t = time.monotonic()
    m = ev.evaluate(Candidate(policy, params), 0)
    wall = time.monotonic() - t
    peak = _status_mib("VmHWM")
    print(f"{a.candidate}: before {before:.0f} MiB, peak {peak:.0f} MiB, replay +{peak - before:.0f} MiB, "
          f"wall {wall:.2f} s, p99 {m.p99_ms:.4f} ms")


if __name__ == "__main__":
    main()
