"""One path from a registered deployment to a `TuneRequest`: what `tailtune tune --deployment` and the nightly job
(which the API's `POST /jobs` and the schedules enqueue) replay for it (docs/tuner.md § A deployment's tune).

From the deployment: its kind, its server (Cassandra), driver and tables, its current config and its model (its
own cluster, `control.model`). A caller may name its own server, driver, tables or current config (the
CLI's options) and adds how the study runs (trials, seeds, objective, study name, ...). A stock server runs no
scheduler: the deployment's current config naming a patched policy (the default `fifo` included) is left out —
the current config is then Cassandra's and the driver's defaults — and a note says so. A current config the
caller names is the caller's: the tuner refuses a patched one on a stock server.

The fields are plain data (the control plane imports no tuner): `tuner.tune.TuneRequest.for_deployment` makes the
request of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from control.db import DeploymentRow
from control.kinds import operations
from control.model import DeploymentModel, build_model

__all__ = ["DeploymentTune", "deployment_model", "deployment_record", "deployment_tune"]


def deployment_record(row: DeploymentRow) -> dict[str, Any]:
    """The deployment as plain data (read inside its session, used after it), with its defaults filled in."""
    return {
        "name": row.name,
        "kind": row.kind,
        "topology": dict(row.topology),
        "objective": dict(row.objective),
        "constraints": dict(row.constraints),
        "current_config": row.current_config,
        "server": row.server or "stock",
        "driver": row.driver or "java4",
        "tables": list(row.tables or []),
        "connection": dict(row.connection),
        "model": dict(row.model or {}),
    }


def deployment_model(dep: Mapping[str, Any], *, timestamps: bool, load: float | None = None) -> DeploymentModel:
    """What a tune of the deployment replays: its own cluster (`control.model.build_model`)."""
    return build_model(str(dep["kind"]), dep["topology"], dep["connection"], dep["model"], timestamps=timestamps,
                       load=load)


@dataclass(frozen=True)
class DeploymentTune:
    """The `TuneRequest` fields of a deployment's tune (`TuneRequest.for_deployment`), the model it replays, the
    model's warning (None when no input rests on a default) and what the request leaves out of the deployment, and
    why."""

    fields: dict[str, Any]
    model: DeploymentModel
    warning: str | None
    notes: tuple[str, ...]


def deployment_tune(
    dep: Mapping[str, Any],
    *,
    timestamps: bool,
    load: float | None = None,
    server: str | None = None,
    driver: str | None = None,
    tables: Sequence[str] = (),
    current: Mapping[str, Any] | None = None,
    evaluator_options: Mapping[str, Any] | None = None,
) -> DeploymentTune:
    """The tune of deployment `dep` (`deployment_record`). `timestamps`: the trace's own arrivals can be replayed;
    `load`: a what-if offered load instead. `server`, `driver`, `tables` and `current` (`{policy, params}`) replace
    the deployment's (None or empty: the deployment's); `evaluator_options` go over the model's (a stall rate,
    ...)."""
    kind = str(dep["kind"])
    if "server" in operations(kind).body_fields:  # a server kind is the deployment's only where its kind has one
        server = server or str(dep.get("server") or "stock")
    else:
        server = server or None
    notes: list[str] = []
    if current is None and dep.get("current_config"):
        current = dep["current_config"]
        if server == "stock" and current["policy"] != "stock":
            notes.append(f"the deployment's current config {current['policy']!r} needs a patched server: a stock "
                         "server runs no scheduler, so the current config replayed is Cassandra's and the driver's "
                         "defaults")
            current = None
    model = deployment_model(dep, timestamps=timestamps, load=load)
    record = model.record()
    warning = model.warning(str(dep["name"]))
    if warning is not None:
        record["warning"] = warning
    fields = {
        "deployment": kind,
        "current": None if current is None else {"policy": current["policy"], "params": current.get("params")},
        "evaluator_options": {**model.options, **(evaluator_options or {})},
        "model": record,
        "server": server,
        "driver": driver or str(dep.get("driver") or "java4"),
        "tables": tuple(tables or dep.get("tables") or ()),
    }
    return DeploymentTune(fields, model, warning, tuple(notes))
