"""The job runs unchanged on a standalone cluster: a master + one worker started from the pip package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers.spark_standalone import running_standalone

pytestmark = [pytest.mark.slow, pytest.mark.spark]


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    with running_standalone(tmp_path) as url:
        yield url


def test_job_on_standalone_cluster(standalone: str, tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("request_id,ts,key,value_size\n1,0.0,a,10\n1,0.0,b,20\n2,1.0,a,10\n3,2.0,c,30\n")
    out = tmp_path / "out"
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               TAILTUNE_HOME=str(tmp_path / "home"))
    res = subprocess.run(
        [sys.executable, "-m", "jobs.characterize", str(csv), "--out", str(out), "--spark-master", standalone,
         "--servers", "2", "--replication", "1"],
        env=env, capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[2],
    )
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads((out / "summary.json").read_text())
    assert doc["multiget_size"]["frac_multi"] == pytest.approx(1 / 3)
    assert doc["key_popularity"]["distinct_keys"] == 3
    assert doc["fanout"]["servers"] == 2
    assert (tmp_path / "work").is_dir()  # the executor really ran on the worker
