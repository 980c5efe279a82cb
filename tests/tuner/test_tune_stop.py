"""A study stopped from outside (a cancelled job) leaves its MLflow run terminated (KILLED), not running."""

from __future__ import annotations

from pathlib import Path

import pytest

from base.settings import Settings
from simulation.source import WorkloadSource
from tuner.tune import TuneRequest, run_tune


class Stop(Exception):
    pass


def test_stopped_study_kills_its_mlflow_run(tmp_path: Path) -> None:
    import mlflow

    settings = Settings(home=tmp_path)
    req = TuneRequest(source=WorkloadSource(profile="soundcloud", requests=800), deployment="cassandra", trials=20,
                      seeds=1, storage=str(tmp_path / "journal.log"), plots=False, policies=("rein",),
                      evaluator_options={"servers": 16})

    def stop(done: int, total: int, best: float | None) -> None:
        if done >= 2:
            raise Stop

    with pytest.raises(Stop):
        run_tune(req, settings=settings, on_progress=stop)
    client = mlflow.tracking.MlflowClient(settings.resolved_mlflow_tracking_uri)
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert parents and all(r.info.status == "KILLED" for r in parents)
