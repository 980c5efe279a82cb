"""The whole nightly pipeline for real: upload → ingest → Spark analysis → Optuna/kvsim tuning → decide →
publish.

~2 minutes on the shared 2-core machine (Spark start + tuning): `make test` (scripts/test.sh) sets
TAILTUNE_E2E=1 so CI runs it; a bare pytest run skips it unless you set it:

    TAILTUNE_E2E=1 .venv/bin/python -m pytest tests/jobs/test_e2e_nightly.py -q
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.handlers import default_handlers
from jobs.worker import Worker
from kinds.memcached.publisher import MemcachedPublisher
from tests.app_fixtures import Svc
from tests.servers.memcached_server import MemcachedNode

API = "/api/v1"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("TAILTUNE_E2E") != "1", reason="set TAILTUNE_E2E=1 (about 2 minutes)"),
]


def test_nightly_end_to_end(
    svc: Svc, memcached_node: MemcachedNode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    svc.settings.spark_master = "local[2]"
    trace = tmp_path / "t.csv"
    subprocess.run(
        [sys.executable, "-m", "tailtune", "generate", "-p", "facebook", "-n", "3000", "-o", str(trace)],
        check=True,
        capture_output=True,
        env={**os.environ, "TAILTUNE_HOME": str(svc.home)},
    )
    dep = svc.client.post(
        f"{API}/deployments",
        headers=svc.write,
        json={
            "name": "e2e",
            "kind": "memcached",
            "topology": {"servers": 4, "slots": 4},
            "connection": {"servers": [memcached_node.address]},
        },
    ).json()
    r = svc.client.post(
        f"{API}/traces?deployment_id={dep['id']}&name=t.csv", content=trace.read_bytes(), headers=svc.write
    )
    assert r.status_code == 202
    job = svc.client.post(
        f"{API}/jobs", headers=svc.write, json={"deployment_id": dep["id"], "tune": {"trials": 4, "seeds": 1}}
    ).json()
    w = Worker(svc.settings, svc.db, "e2e", handlers=default_handlers(), schedule=False)
    while w.run_once() is not None:
        pass
    got = svc.client.get(f"{API}/jobs/{job['id']}", headers=svc.read).json()
    assert got["status"] == "succeeded", got["logs"]
    assert [s["name"] for s in got["steps"]][:5] == ["ingest", "analyze", "drift", "tune", "decide"]
    assert got["result"]["drift"]["changed"] is True  # the deployment's first study: nothing to compare against
    assert got["mlflow_run_id"] and got["result"]["recommendation"]["verdict"] in (
        "recommend",
        "keep current",
    )
    assert (svc.settings.home_dir / got["result"]["analysis"] / "summary.json").is_file()  # relative to home
    if got["result"]["decision"]["accepted"]:
        latest = svc.client.get(f"{API}/configs/{dep['id']}", headers=svc.read).json()
        pub = MemcachedPublisher("e2e", dep["connection"], 2.0)
        assert pub.read_current() == (latest["version"], latest["config"])
