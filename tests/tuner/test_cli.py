"""`tailtune tune` end to end on the real simulator (small traces), with MLflow tracking."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("kvsim")


def test_tune_memcached_json(cli: Any) -> None:
    r = cli("tune", "--profile", "mice-elephant", "--requests", "3000", "--store", "memcached",
            "--trials", "6", "--seeds", "2", "--no-mlflow", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    for key in ("policy", "params", "verdict", "expected", "baseline", "paper_default", "trials", "study",
                "mlflow_run_id"):
        assert key in doc
    assert doc["baseline"]["policy"] == "batching" and doc["paper_default"]["policy"] == "chisel"
    assert doc["trials"] == 6 and doc["verdict"] in ("recommend", "keep current")
    assert set(doc["expected"]) >= {"p50_ms", "p95_ms", "p99_ms", "ci"}
    assert doc["render"]["json"]["memcached_client"]["mode"] == doc["policy"]


def test_tune_cassandra_tracks_in_mlflow(cli: Any, settings: Any) -> None:
    r = cli("tune", "--profile", "soundcloud", "--requests", "3000", "--store", "cassandra", "--trials", "5",
            "--seeds", "2", "--policies", "rein,fifo", "--space", "rein.tau_1=1", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    from mlflow import MlflowClient

    client = MlflowClient(settings.resolved_mlflow_tracking_uri)
    parent = client.get_run(doc["mlflow_run_id"])
    assert parent.data.params["deployment"] == "cassandra"
    children = client.search_runs([parent.info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert sorted(int(c.data.tags["tailtune.trial"]) for c in children) == list(range(5))
    arts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"recommendation.json", "search_space.json", "plots"} <= arts
    plots = {a.path for a in client.list_artifacts(parent.info.run_id, "plots")}
    assert {"plots/optimization_history.png", "plots/latency_cdf.png"} <= plots
    # rerunning the same command resumes the study: no new trial, same parent run
    r2 = cli("tune", "--profile", "soundcloud", "--requests", "3000", "--store", "cassandra", "--trials", "5",
             "--seeds", "2", "--policies", "rein,fifo", "--space", "rein.tau_1=1", "--json")
    doc2 = json.loads(r2.stdout)
    assert doc2["study"] == doc["study"] and doc2["mlflow_run_id"] == doc["mlflow_run_id"]
    assert doc2["trials"] == 5


@pytest.mark.parametrize(("args", "field"), [
    (["--objective", "p98"], "objective"),
    (["--constraint", "p50<5"], "constraint"),
    (["--space", "rein.k"], "space"),
    (["--store", "redis"], "store"),
])
def test_bad_input_exit_2(cli: Any, args: list[str], field: str) -> None:
    r = cli("tune", "--profile", "soundcloud", "--requests", "100", "--no-mlflow", *args)
    assert r.exit_code == 2
    assert f"field '{field}'" in r.stderr


def test_needs_one_source(cli: Any) -> None:
    r = cli("tune", "--store", "cassandra")
    assert r.exit_code == 2 and "exactly one of" in r.stderr
