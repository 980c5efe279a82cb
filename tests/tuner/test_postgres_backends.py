"""Optuna and MLflow on PostgreSQL (the docker-compose setup): a small study in an RDB storage on the session's
throw-away server, tracked by our own MLflow callback into a `postgresql+psycopg://` backend store.
"""

from __future__ import annotations

import json

import pytest

from tests.tuner._runner import config as fake_config
from tests.tuner.fakes import FakeEvaluator
from tuner.study import run_study
from tuner.tracking import MlflowTracker


def test_study_and_mlflow_runs_on_postgresql(postgres_server, tmp_path):
    from mlflow import MlflowClient

    with postgres_server.database() as optuna_url, postgres_server.database() as mlflow_url:
        # Optuna: a bare postgresql:// URL means psycopg 3 (psycopg2 is not installed)
        bare = optuna_url.replace("postgresql+psycopg://", "postgresql://")
        out = run_study(fake_config(bare, trials=4, delay_s=0.0), evaluator=FakeEvaluator())
        first = [(t.number, t.state.name, t.values) for t in out.study.trials]
        assert [s for _, s, _ in first].count("COMPLETE") >= 1 and len(first) == 4
        assert {s for _, s, _ in first} <= {"COMPLETE", "PRUNED"}
        again = run_study(fake_config(optuna_url, trials=6, delay_s=0.0), evaluator=FakeEvaluator())
        # resumed from PostgreSQL: the 4 finished trials kept as they were, 2 new ones
        assert [(t.number, t.state.name, t.values) for t in again.study.trials[:4]] == first
        assert len(again.study.trials) == 6

        tracker = MlflowTracker(mlflow_url, artifact_root=tmp_path / "artifacts")
        parent = tracker.start(again.study, params={"policy": "rein"}, documents={"space": {"k": [1, 8]}})
        for t in again.study.trials:
            tracker.log_trial(t)
        tracker.finish()
        # a second tracker (a resumed run) re-opens the same parent and logs no trial twice
        resumed = MlflowTracker(mlflow_url, artifact_root=tmp_path / "artifacts")
        assert resumed.start(again.study, params={}, documents={}) == parent
        for t in again.study.trials:
            resumed.log_trial(t)

        client = MlflowClient(tracking_uri=mlflow_url)
        assert client.get_run(parent).data.params == {"policy": "rein"}
        children = client.search_runs([tracker.experiment_id], f"tags.mlflow.parentRunId = '{parent}'")
        got = {int(r.data.tags["tailtune.trial"]): r.data.metrics.get("objective_0") for r in children}
        assert sorted(got) == [0, 1, 2, 3, 4, 5]  # one nested run per trial, none twice
        for t in again.study.trials:
            assert got[t.number] == (pytest.approx(t.values[0]) if t.values else None)
        assert (tmp_path / "artifacts").is_dir()  # the space.json artifact landed in the artifact root


def test_the_study_stores_no_storage_password(postgres_server):
    """The study's user attributes (read by anyone who reads the storage) and a failed open hold no password."""
    from base.errors import BadInputError
    from tuner.study import open_storage

    secret = "pw-in-the-url_9f3"
    with postgres_server.database() as url:
        # the throw-away server trusts local logins, so a URL with any password opens the database
        with_pw = url.replace("postgresql+psycopg://postgres@", f"postgresql+psycopg://postgres:{secret}@")
        assert secret in with_pw, url
        out = run_study(fake_config(with_pw, trials=2, delay_s=0.0), evaluator=FakeEvaluator())
        stored = out.study.user_attrs["tailtune_config"]
        assert secret not in json.dumps(out.study.user_attrs)
        assert stored["storage"].startswith("postgresql+psycopg://postgres:***@")
    with pytest.raises(BadInputError) as err:
        open_storage(f"postgresql://postgres:{secret}@127.0.0.1:1/nowhere")
    assert secret not in str(err.value) and "postgres:***@" in str(err.value)
