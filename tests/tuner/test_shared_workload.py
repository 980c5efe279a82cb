"""The shared workload is one copy per host: two worker processes replaying the same study's evaluator map the
store's files and hold no copy of their own.

Measured from the kernel's accounting (/proc/PID/smaps_rollup and /proc/PID/smaps), not RSS: a page of a mapped
file that several processes read is shared — it counts in each one's RSS, once in the sum of their PSS, and in
none's USS (unique set: private pages). Byte counts only, no timings. Both workers stay alive until they are
measured, so that every page they read is mapped by more than one process.
"""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="Linux /proc needed")

SOURCE = {"profile": "soundcloud", "requests": 60_000, "trace_seed": 1}
SEEDS = (0, 1, 2)


def _uss(pid: int | str = "self") -> int:
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, _, rest = line.partition(":")
        fields[name.strip()] = int(rest.split()[0]) * 1024
    return fields["Private_Clean"] + fields["Private_Dirty"]


def _mapped(pid: int, directory: Path) -> dict[str, int]:
    """Rss, Pss and private bytes of the process's mappings of files under `directory`."""
    out = {"rss": 0, "pss": 0, "private": 0}
    inside = False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and ":" in head[3]:  # a mapping's header line
            inside = len(head) >= 6 and head[5].startswith(str(directory))
            continue
        if not inside or not head:
            continue
        name, value = head[0].rstrip(":"), head[1] if len(head) > 1 else "0"
        if name == "Rss":
            out["rss"] += int(value) * 1024
        elif name == "Pss":
            out["pss"] += int(value) * 1024
        elif name in ("Private_Clean", "Private_Dirty"):
            out["private"] += int(value) * 1024
    return out


def _worker(spec: dict[str, Any], ready: Any, done: Any) -> None:
    """A study worker's evaluator: replays the baseline on every seed, reports its USS before and after, waits."""
    import kvsim
    import numpy as np

    from tuner.evaluators import EvaluatorSpec, KvsimCassandraEvaluator, build_evaluator
    from tuner.space import Candidate

    # a first replay of a tiny private workload and the trace's metadata read from the store: the lazy imports
    # happen before the first figure; no layout nor draws are read yet
    tiny = kvsim.Workload(kvsim.Cluster(servers=4, slots=1), np.arange(9), tokens=np.arange(8))
    kvsim.replay(tiny, kvsim.ReplayConfig(replica="round-robin"))
    ev = build_evaluator(EvaluatorSpec.from_dict(spec))
    assert isinstance(ev, KvsimCassandraEvaluator) and ev.requests == SOURCE["requests"]  # the trace, mapped
    before = _uss()
    for seed in SEEDS:
        ev.evaluate(Candidate("fifo", {}), seed)
    ready.put((os.getpid(), before, _uss()))
    done.wait(120)


def test_two_workers_hold_one_copy_of_the_workload(tailtune_home: Path) -> None:
    from simulation.cassandra import PreparedTrace
    from tuner.evaluators import EvaluatorSpec, KvsimCassandraEvaluator, build_evaluator
    from tuner.space import Candidate

    spec = EvaluatorSpec("kvsim-cassandra", {"source": SOURCE})
    coordinator = build_evaluator(spec)
    assert isinstance(coordinator, KvsimCassandraEvaluator)
    for seed in SEEDS:  # the coordinator's baseline writes the trace, the layout and each seed's draws
        coordinator.evaluate(Candidate("fifo", {}), seed)
    trace = coordinator._prepared()
    assert isinstance(trace, PreparedTrace) and trace.store is not None and trace.store.owner
    store = trace.store.directory
    workload = trace.store.nbytes()
    assert workload > 20 * 2**20, workload  # big enough for the bounds below to mean something

    ctx = multiprocessing.get_context("spawn")
    ready, done = ctx.Queue(), ctx.Event()
    os.environ["MALLOC_MMAP_THRESHOLD_"] = "65536"  # a freed replay buffer goes back to the kernel at once
    try:
        procs = [ctx.Process(target=_worker, args=(spec.as_dict(), ready, done), daemon=True) for _ in range(2)]
        for p in procs:
            p.start()
        reports = [ready.get(timeout=120) for _ in procs]
        mapped = [_mapped(pid, store) for pid, _, _ in reports]
        layout_dir = next(store.glob("layout-*"))
        in_layout = [_mapped(pid, layout_dir)["rss"] for pid, _, _ in reports]
        in_seeds = [sum(_mapped(pid, d)["rss"] for d in store.glob("seed-*")) for pid, _, _ in reports]
    finally:
        os.environ.pop("MALLOC_MMAP_THRESHOLD_", None)
        done.set()
        for p in procs:
            p.join(30)
    layout = sum(p.stat().st_size for p in layout_dir.glob("*.npy"))
    for (pid, before, after), m, lay, seeds in zip(reports, mapped, in_layout, in_seeds, strict=True):
        # each worker read the workload from the store's files: the layout stays mapped in its RSS, each seed's
        # draws leave its RSS after the seed's replay (`shared.release_pages`) ...
        assert lay > layout // 2, (pid, lay, layout)
        assert seeds == 0, (pid, seeds)
        # ... and holds none of it privately: its unique memory grew by far less than the workload's size
        assert m["private"] < workload // 20, (pid, m, workload)
        assert after - before < workload // 4, (pid, before, after, workload)
    # one copy between them: the workers' proportional shares of the files add up to less than one copy
    assert sum(m["pss"] for m in mapped) < workload, (mapped, workload)
    trace.store.remove()
    assert not store.exists()
