"""A process replaying from the host's workload store holds one seed's draws at a time: after each replay the
seed's mapped pages leave its resident set (the page cache keeps them), and replaying again reads the same
data. Measured from /proc/self/smaps (bytes of the store's mappings, per file)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simulation import cassandra, shared
from simulation.cassandra import CassandraDeployment
from simulation.policies import resolve
from simulation.source import load_table

pytestmark = pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux /proc needed")


def _rss_by_group(directory: Path) -> dict[str, int]:
    """Resident bytes of this process's mappings of the store's files, per group (`trace`, `layout-…`, `seed-0-…`)."""
    out: dict[str, int] = {}
    group = None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and ":" in head[3]:
            group = None
            if len(head) >= 6 and head[5].startswith(str(directory)):
                parts = Path(head[5]).parent.name.split("-")  # trace, layout-<digest>, seed-<n>-<digest>
                group = "-".join(parts[:2]) if parts[0] == "seed" else parts[0]
            continue
        if group is not None and head and head[0] == "Rss:":
            out[group] = out.get(group, 0) + int(head[1]) * 1024
    return out


def test_a_seed_leaves_rss_after_its_replay_and_replays_the_same(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    dep = CassandraDeployment(servers=16)
    store = shared.WorkloadStore(tmp_path / "store")
    trace = cassandra.share(cassandra.prepare(load_table(profile="soundcloud", requests=40_000, seed=1), dep), store)
    fifo = resolve("fifo", {})
    first = cassandra.replay(trace, dep, fifo, 0, classes=False)
    second = cassandra.replay(trace, dep, fifo, 1, classes=False)
    rss = _rss_by_group(store.directory)
    assert rss.get("trace", 0) > 100_000 and rss.get("layout", 0) > 100_000  # read by every replay: kept
    assert rss.get("seed-0", 0) == 0 and rss.get("seed-1", 0) == 0
    again = cassandra.replay(trace, dep, fifo, 0, classes=False)  # faulted back in from the page cache
    assert np.array_equal(again.latency_ms, first.latency_ms)
    assert not np.array_equal(second.latency_ms, first.latency_ms)
    # without the release the draws stay resident: what the assertions above would see otherwise
    monkeypatch.setattr(cassandra, "release_pages", lambda arrays: 0)
    cassandra.replay(trace, dep, fifo, 1, classes=False)
    assert _rss_by_group(store.directory).get("seed-1", 0) > 100_000


def test_release_pages_leaves_arrays_that_are_not_mapped_files() -> None:
    a = np.arange(10)
    assert shared.release_pages([a, a[2:]]) == 0
    assert a.tolist() == list(range(10))
