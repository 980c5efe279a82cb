"""The predicted-vs-observed pipeline (validation/sharded_memcached.py) end to end on tiny inputs against real
memcached processes, through the live replay engine: both arms replayed with every answer right, the model's
prediction beside each, the machine-noise probe beside them, the table written. No latency figures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from validation import sharded_memcached

pytestmark = pytest.mark.skipif(shutil.which("memcached") is None, reason="memcached is not installed")


@pytest.mark.slow
def test_pipeline_runs_end_to_end(tmp_path: Path) -> None:
    res = sharded_memcached.run(("mice-elephant", "bimodal"), requests=300, servers=2, memory_mb=64,
                                gaps_us=(3000.0,), block_s=0.2, warmup_s=0.2, max_lag_ms=60000.0, noise_reps=20)
    (load,) = res["loads"].values()
    assert set(load["workloads"]) == {"mice-elephant", "bimodal"}
    assert res["model"]["calibrated"]["client_overhead"]["source"] == "calibrated"
    for r in load["workloads"].values():
        assert r["requests"] == 300 and len(r["idle_rtt"]["block_p50_us"]) == 5
        doc = r["report"]
        assert [a["name"] for a in doc["arms"]] == ["batching", "chisel"]
        assert set(doc["arms"][1]["config"]["params"]) == {"elephant_threshold", "merge", "split_keys"}
        for arm in ("batching", "chisel"):
            observed, counted = doc["observed"][arm], doc["cluster"]["arms"][arm]
            assert observed["requests"] > 0 and observed["errors"] == observed["timeouts"] == 0
            assert counted["answers_checked"] == observed["requests"] and counted["wrong_answers"] == 0
            assert doc["predicted"][arm]["p50_ms"] > 0
        assert doc["cluster"]["evictions"] == 0
        assert {c["metric"] for c in doc["comparisons"]} == {"p50", "p95", "p99"}
    out, js = tmp_path / "table.md", tmp_path / "res.json"
    sharded_memcached.main(["--requests", "200", "--servers", "2", "--memory-mb", "64", "--workloads", "soundcloud",
                            "--block-s", "0.2", "--warmup-s", "0.2", "--max-lag-ms", "60000", "--noise-reps", "20",
                            "--gaps-us", "3000,1500", "--out", str(out), "--json-out", str(js)])
    text = out.read_text()
    assert "**Mean gap 3000 µs**" in text and "**Mean gap 1500 µs**" in text
    assert text.count("| soundcloud | batching |") == 2 and text.count("| soundcloud | chisel |") == 2
    assert "wrong answers 0 (missing 0), evictions 0" in text
    assert set(json.loads(js.read_text())["loads"]) == {"3000.0", "1500.0"}
