"""The predicted-vs-observed pipeline (validation/sharded_memcached.py) end to end on tiny inputs against real
memcached processes: every request answered, every key's value right, the table written. No latency figures."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from validation import sharded_memcached

pytestmark = pytest.mark.skipif(shutil.which("memcached") is None, reason="memcached is not installed")


@pytest.mark.slow
def test_pipeline_runs_end_to_end(tmp_path: Path) -> None:
    res = sharded_memcached.run(("mice-elephant", "bimodal"), requests=40, servers=2, processes=2, senders=2,
                                repeats=2, gap_us=3000.0, profile_reps=3, overhead_reps=20, start_delay_s=0.3)
    assert set(res["workloads"]) == {"mice-elephant", "bimodal"}
    for r in res["workloads"].values():
        assert r["wrong"] == 0 and r["unanswered"] == 0
        assert r["requests"] == 40
        assert r["levels"]["split_keys"] >= 1 and r["levels"]["merge"] >= 1
        for v in ("batching", "chisel"):
            assert len(r["real"][v]) == 2  # one row of percentiles per run
            assert np.all(np.isfinite(r["real"][v])) and np.all(np.asarray(r["predicted"][v]) > 0)
    out = tmp_path / "table.md"
    sharded_memcached.main(["--requests", "20", "--repeats", "1", "--servers", "2", "--workloads", "soundcloud",
                            "--overhead-reps", "20", "--profile-reps", "3", "--start-delay-s", "0.3",
                            "--out", str(out)])
    text = out.read_text()
    assert "| soundcloud | batching |" in text and "| soundcloud | chisel |" in text
    assert "wrong answers 0, unanswered 0" in text
