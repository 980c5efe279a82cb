"""The predicted-vs-observed pipeline (validation/sharded_memcached.py) end to end on tiny inputs against real
memcached processes: every request answered, every key's value right, the table written. No latency figures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from validation import sharded_memcached

pytestmark = pytest.mark.skipif(shutil.which("memcached") is None, reason="memcached is not installed")


@pytest.mark.slow
def test_pipeline_runs_end_to_end(tmp_path: Path) -> None:
    res = sharded_memcached.run(("mice-elephant", "bimodal"), requests=40, servers=2, processes=2, senders=2,
                                repeats=2, gaps_us=(3000.0,), profile_reps=3, overhead_reps=20, start_delay_s=0.3)
    (load,) = res["loads"].values()
    assert set(load["workloads"]) == {"mice-elephant", "bimodal"}
    for r in load["workloads"].values():
        assert r["wrong"] == 0 and r["unanswered"] == 0
        assert r["requests"] == 40
        assert r["levels"]["split_keys"] >= 1 and r["levels"]["merge"] >= 1
        assert len(r["idle_rtt"]["block_p50_us"]) == 5
        for v in ("batching", "chisel"):
            assert len(r["real"][v]) == 2  # one row of percentiles per run
            assert np.all(np.isfinite(r["real"][v]))
            for m in ("before", "after"):
                assert np.all(np.asarray(r["predicted"][m][v]) > 0)
            # the client host serializes the client work: never faster than in parallel
            assert r["predicted"]["after"][v][0] >= r["predicted"]["before"][v][0] - 1e-9
            assert r["client_cpu_load"]["before"][v] == 0.0 < r["client_cpu_load"]["after"][v]
    out, js = tmp_path / "table.md", tmp_path / "res.json"
    sharded_memcached.main(["--requests", "20", "--repeats", "1", "--servers", "2", "--workloads", "soundcloud",
                            "--overhead-reps", "20", "--profile-reps", "3", "--start-delay-s", "0.3",
                            "--gaps-us", "3000,1500", "--out", str(out), "--json-out", str(js)])
    text = out.read_text()
    assert "**Mean gap 3000 µs**" in text and "**Mean gap 1500 µs**" in text
    assert text.count("| soundcloud | batching |") == 2 and text.count("| soundcloud | chisel |") == 2
    assert "wrong answers 0, unanswered 0" in text
    assert set(json.loads(js.read_text())["loads"]) == {"3000.0", "1500.0"}
