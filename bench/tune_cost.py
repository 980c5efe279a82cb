"""Wall time of a whole `tailtune tune` job: a 100-trial study on a 200k-request trace.

Runs `tuner.tune.run_tune` exactly as the CLI does (default Cassandra space, 3 seeds, prefix pruning,
2 worker processes, JournalStorage, MLflow tracking + plots) in a fresh TAILTUNE_HOME and reports the
wall time of the job and of its study phase.

    .venv/bin/python bench/tune_cost.py --requests 200000 --trials 100 --jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--profile", default="soundcloud")
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--store", default="cassandra")
    ap.add_argument("--policies", default=None, help="comma-separated; default: the whole space")
    a = ap.parse_args()
    home = tempfile.mkdtemp(prefix="tailtune-bench-cost-")
    os.environ["TAILTUNE_HOME"] = home
    from base.settings import get_settings
    from simulation.source import WorkloadSource
    from tuner.tune import TuneRequest, run_tune

    get_settings.cache_clear()
    t0 = time.time()
    doc = run_tune(TuneRequest(source=WorkloadSource(profile=a.profile, requests=a.requests),
                               deployment=a.store, trials=a.trials, seeds=a.seeds, jobs=a.jobs,
                               policies=tuple(a.policies.split(",")) if a.policies else None)).to_json()
    wall = time.time() - t0
    print(json.dumps({
        "profile": a.profile, "requests": a.requests, "trials": doc["trials"], "trial_states": doc["trial_states"],
        "replays": doc["replays"], "policies": a.policies or "all",
        "seeds": a.seeds, "jobs": a.jobs, "study_wall_s": round(doc["wall_s"], 1),
        "job_wall_s": round(wall, 1), "verdict": doc["verdict"], "policy": doc["policy"], "params": doc["params"],
        "expected_p99_ms": doc["expected"]["p99_ms"], "baseline_p99_ms": doc["baseline"]["p99_ms"],
        "paper_default_p99_ms": doc["paper_default"]["p99_ms"], "home": home,
    }))


if __name__ == "__main__":
    main()
