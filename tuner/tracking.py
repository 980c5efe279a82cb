"""Our own small MLflow callback (optuna-integration's MLflowCallback is deprecated).

One parent run per study (dataset id, deployment, search space, summary, objective, seeds) and one nested run
per finished trial (params, mean metrics, objective values and CI, state), logged with `MlflowClient` (no global
active run, so several trackers can live in one process). The parent run id is stored in the study's user
attribute `mlflow_run_id`, so a resumed study keeps logging into the same parent and never logs a trial twice.
Artifacts of the parent: recommendation JSON, plots (PNG), space/summary JSON. Default store: SQLite under
TAILTUNE_HOME (`settings.resolved_mlflow_tracking_uri`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["MlflowTracker"]

_MAX_PARAM = 6000


def _flat(prefix: str, d: Mapping[str, Any]) -> dict[str, str]:
    return {f"{prefix}{k}": str(v)[:_MAX_PARAM] for k, v in d.items()}


class MlflowTracker:
    """An Optuna-style callback `(study, trial)` that logs each finished trial as a nested MLflow run."""

    def __init__(self, tracking_uri: str, experiment: str = "tailtune", *, artifact_root: Path | None = None):
        logging.getLogger("mlflow").setLevel(logging.WARNING)
        logging.getLogger("alembic").setLevel(logging.WARNING)
        from mlflow import MlflowClient

        if tracking_uri.startswith("sqlite:///"):
            Path(tracking_uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        self.client = MlflowClient(tracking_uri=tracking_uri)
        self.tracking_uri = tracking_uri
        exp = self.client.get_experiment_by_name(experiment)
        if exp is None:
            location = artifact_root.resolve().as_uri() if artifact_root is not None else None
            self.experiment_id = self.client.create_experiment(experiment, artifact_location=location)
        else:
            self.experiment_id = exp.experiment_id
        self.run_id: str | None = None
        self._logged: set[int] = set()

    # ------------------------------------------------------------------ parent
    def start(self, study: Any, *, params: Mapping[str, Any], documents: Mapping[str, Any]) -> str:
        """Open (or re-open, for a resumed study) the parent run of `study`; returns its id."""
        existing = study.user_attrs.get("mlflow_run_id")
        if existing:
            try:
                run = self.client.get_run(existing)
                if run.info.experiment_id == self.experiment_id:
                    self.run_id = existing
                    self.client.update_run(existing, status="RUNNING")
            except Exception:  # the run is in another store: start a fresh parent
                self.run_id = None
        if self.run_id is None:
            run = self.client.create_run(
                self.experiment_id, run_name=f"study-{study.study_name}",
                tags={"tailtune.study": study.study_name, "tailtune.kind": "study"},
            )
            self.run_id = run.info.run_id
            study.set_user_attr("mlflow_run_id", self.run_id)
            from mlflow.entities import Param

            self.client.log_batch(
                self.run_id, params=[Param(k, v) for k, v in _flat("", params).items()]
            )
            for name, doc in documents.items():
                self.client.log_dict(self.run_id, doc, f"{name}.json")
        self._logged = self._logged_trials()
        return self.run_id

    def _logged_trials(self) -> set[int]:
        assert self.run_id is not None
        runs = self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{self.run_id}'", max_results=50000
        )
        return {int(r.data.tags["tailtune.trial"]) for r in runs if "tailtune.trial" in r.data.tags}

    # ------------------------------------------------------------------ trials
    def __call__(self, study: Any, trial: Any) -> None:
        self.log_trial(trial)

    def log_trial(self, trial: Any) -> None:
        """One nested run for one finished trial (idempotent by trial number)."""
        from mlflow.entities import Metric, Param

        if self.run_id is None or trial.number in self._logged:
            return
        now = int(time.time() * 1000)
        attrs = trial.user_attrs
        cand = attrs.get("candidate") or {}
        params = {"policy": cand.get("policy", ""), **(cand.get("params") or {})}
        metrics: dict[str, float] = {}
        for k, v in (attrs.get("metrics") or {}).items():
            metrics[k] = float(v)
        for i, v in enumerate(trial.values or []):
            metrics[f"objective_{i}"] = float(v)
        for i, v in enumerate(attrs.get("ci") or []):
            metrics[f"objective_{i}_ci"] = float(v)
        metrics["replays"] = float(attrs.get("replays", 0.0))
        for step, v in (trial.intermediate_values or {}).items():
            metrics[f"intermediate_{step}"] = float(v)
        run = self.client.create_run(
            self.experiment_id, run_name=f"trial-{trial.number}",
            tags={"mlflow.parentRunId": self.run_id, "tailtune.trial": str(trial.number),
                  "tailtune.state": trial.state.name,
                  **({"tailtune.note": str(attrs.get("infeasible") or attrs.get("error"))[:500]}
                     if attrs.get("infeasible") or attrs.get("error") else {})},
        )
        self.client.log_batch(
            run.info.run_id,
            metrics=[Metric(k, v, now, 0) for k, v in metrics.items()],
            params=[Param(k, v) for k, v in _flat("", params).items()],
        )
        status = "FINISHED" if trial.state.name in ("COMPLETE", "PRUNED") else "FAILED"
        self.client.set_terminated(run.info.run_id, status=status)
        self._logged.add(trial.number)

    # ------------------------------------------------------------------ results
    def log_result(self, recommendation: Mapping[str, Any], figures: Mapping[str, Any],
                   documents: Mapping[str, Any] | None = None) -> None:
        """Recommendation JSON, figures (PNG) and extra JSON documents on the parent; headline metrics."""
        from mlflow.entities import Metric

        if self.run_id is None:
            return
        self.client.log_dict(self.run_id, dict(recommendation), "recommendation.json")
        for name, doc in (documents or {}).items():
            self.client.log_dict(self.run_id, doc, f"{name}.json")
        for name, fig in figures.items():
            if fig is not None:
                self.client.log_figure(self.run_id, fig, f"plots/{name}.png")
        now = int(time.time() * 1000)
        out = []
        for section in ("expected", "baseline", "paper_default"):
            sec = recommendation.get(section) or {}
            for k in ("p50_ms", "p95_ms", "p99_ms"):
                if isinstance(sec.get(k), int | float):
                    out.append(Metric(f"{section}_{k}", float(sec[k]), now, 0))
        if out:
            self.client.log_batch(self.run_id, metrics=out)
        self.client.set_tag(self.run_id, "tailtune.verdict", str(recommendation.get("verdict")))
        self.client.log_text(self.run_id, json.dumps(recommendation.get("render", {}), indent=2),
                             "config/rendered.json")

    def finish(self, status: str = "FINISHED") -> None:
        if self.run_id is not None:
            self.client.set_terminated(self.run_id, status=status)
