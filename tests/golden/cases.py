"""Golden cases: `simulate --json` and small `tune --json` runs whose outputs must stay bit-identical across
refactors. Each case is a CLI argument list; the expected JSON lives in `data/<name>.json`.

Regenerate (only when a change is meant to alter results, and say which in the commit):
`python -m tests.golden.regen` (writes data/*.json).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["CASES", "DATA", "VOLATILE", "run_case", "run_cases", "stable"]

DATA = Path(__file__).with_name("data")

#: Keys whose values depend on the machine or the run (wall time, ids, paths), removed before comparing.
VOLATILE = frozenset(
    {"sim_wall_s", "events_per_s", "mlflow_run_id", "study", "wall_s", "storage", "created", "duration_s",
     "elapsed_s", "tracking_uri", "artifacts", "started", "finished"}
)

_SIM = ["simulate", "--json"]
_TUNE = ["tune", "--json", "--jobs", "1", "--storage", "memory", "--no-mlflow"]

CASES: dict[str, list[str]] = {
    "sim_fifo": [*_SIM, "--profile", "soundcloud", "--requests", "4000", "--policy", "fifo"],
    "sim_rein": [*_SIM, "--profile", "soundcloud", "--requests", "4000", "--policy", "rein",
                 "--param", "k=4", "--param", "range_factor=3", "--seed", "3"],
    "sim_rein_sbf": [*_SIM, "--profile", "facebook", "--requests", "3000", "--policy", "rein-sbf"],
    "sim_rein_sds": [*_SIM, "--profile", "facebook", "--requests", "3000", "--policy", "rein-sds"],
    "sim_brb_equalmax": [*_SIM, "--profile", "soundcloud", "--requests", "3000", "--policy", "brb-equalmax"],
    "sim_brb_unifincr": [*_SIM, "--profile", "soundcloud", "--requests", "3000", "--policy", "brb-unifincr"],
    "sim_oracle": [*_SIM, "--profile", "soundcloud", "--requests", "3000", "--policy", "oracle"],
    "sim_duplicate": [*_SIM, "--profile", "soundcloud", "--requests", "3000", "--policy", "duplicate"],
    "sim_speculative": [*_SIM, "--profile", "soundcloud", "--requests", "3000", "--policy", "speculative"],
    "sim_heron": [*_SIM, "--profile", "bimodal", "--requests", "3000", "--policy", "heron"],
    "sim_tailx": [*_SIM, "--profile", "bimodal", "--requests", "3000", "--policy", "tailx"],
    "sim_c3": [*_SIM, "--profile", "soundcloud", "--requests", "3000", "--policy", "c3"],
    "sim_ds_slowdown": [*_SIM, "--profile", "soundcloud", "--requests", "3000", "--policy", "ds",
                        "--slowdown-interval-ms", "50", "--slowdown-fraction", "0.1"],
    "sim_rein_size_cost": [*_SIM, "--profile", "bimodal", "--requests", "3000", "--policy", "rein",
                           "--size-aware-cost"],
    "sim_c3_slow_writes_closed": [*_SIM, "--profile", "soundcloud", "--requests", "3000", "--policy", "c3",
                                  "--slow-servers", "8", "--slow-factor", "3", "--write-fraction", "0.1",
                                  "--client-model", "closed", "--threads", "256"],
    "sim_brb_replica_lo": [*_SIM, "--profile", "soundcloud", "--requests", "3000", "--policy", "brb-equalmax",
                           "--replica", "least-outstanding", "--demand-dist", "lognormal"],
    "sim_fifo_timestamps": [*_SIM, "--profile", "soundcloud", "--requests", "3000", "--policy", "fifo",
                            "--use-timestamps", "--load", "0.5"],
    "sim_chisel": [*_SIM, "--profile", "mice-elephant", "--requests", "3000", "--policy", "chisel"],
    "sim_chisel_params": [*_SIM, "--profile", "mice-elephant", "--requests", "3000", "--policy", "chisel",
                          "--param", "split_keys=20", "--param", "merge=2", "--worker-threads", "2"],
    "sim_batching": [*_SIM, "--profile", "mice-elephant", "--requests", "3000", "--policy", "batching"],
    "sim_batching_poisson": [*_SIM, "--profile", "mice-elephant", "--requests", "3000", "--policy", "batching",
                             "--inter-arrival-us", "200", "--seed", "5"],
    "tune_cassandra": [*_TUNE, "--profile", "soundcloud", "--requests", "3000", "--store", "cassandra",
                       "--trials", "8", "--seeds", "2", "--server", "rein-patched", "--alternative-trials", "0"],
    "tune_cassandra_sized": [*_TUNE, "--profile", "bimodal", "--requests", "2000", "--store", "cassandra",
                             "--trials", "6", "--seeds", "1", "--policies", "rein,heron,tailx",
                             "--server", "rein-patched", "--alternative-trials", "0"],
    "tune_cassandra_stock": [*_TUNE, "--profile", "soundcloud", "--requests", "3000", "--store", "cassandra",
                             "--trials", "8", "--seeds", "2", "--stall-rate", "0.5", "--stall-ms", "20",
                             "--table", "ks.users", "--alternative-trials", "4"],
    "tune_memcached": [*_TUNE, "--profile", "mice-elephant", "--requests", "2000", "--store", "memcached",
                       "--trials", "6", "--seeds", "2"],
}


def stable(doc: Any) -> Any:
    """`doc` without the volatile keys (recursively)."""
    if isinstance(doc, dict):
        return {k: stable(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [stable(v) for v in doc]
    return doc


def run_case(name: str, home: Path) -> Any:
    """Runs one case through the installed CLI in a fresh process; returns its JSON without volatile keys."""
    env = {**os.environ, "TAILTUNE_HOME": str(home / name), "PYTHONHASHSEED": "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "tailtune", *CASES[name]], capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"golden case {name} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return stable(json.loads(proc.stdout))


def run_cases(names: list[str], home: Path) -> dict[str, Any]:
    """Runs the cases one after another in ONE fresh process (`python -m tests.golden.batch`: each case through
    the CLI's entry point in-process, its own TAILTUNE_HOME): the same outputs as `run_case` without a Python
    start-up per case. Returns {name: JSON without volatile keys}; a failed case raises naming it."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.golden.batch", str(home), *names], capture_output=True, text=True, env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"golden batch exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    docs: dict[str, Any] = json.loads(proc.stdout)
    for name, doc in docs.items():
        if isinstance(doc, dict) and "__error__" in doc:
            raise RuntimeError(f"golden case {name} failed: {doc['__error__']}")
    return {name: stable(doc) for name, doc in docs.items()}
