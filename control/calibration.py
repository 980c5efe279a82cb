"""Calibration: the model inputs discovery cannot read, measured on the live system and marked `calibrated`.

Calibration measures *inputs* — how long one read takes the node, how long the network takes — and never tunes
the model until its predictions match an observation: no simulator output is compared with anything here. What
is measured is the deployment's kind's (`DeploymentKind.calibrate`, in `kinds/<name>/calibration.py`): a
Cassandra cluster's network, service time and per-partition client cost by client-timed requests at low load; a
memcached pool's client overhead by the profiler on scratch keys.

Every connection follows the egress rules (`control.egress`), like discovery's. All measurements happen
first; the model is written in one transaction at the end; a failure writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from sqlalchemy import select

from base.settings import Settings
from control.db import Database, DeploymentRow
from control.egress import Egress, EgressRefused
from control.errors import Missing
from control.grants import PASSWORD, granted
from control.kind import Calibrated, DiscoveryFailed, Target
from control.kinds import operations
from control.model import ModelTooLarge, check_model_size

__all__ = ["Calibrated", "calibrate_deployment", "merge_calibration"]


def merge_calibration(model: Mapping[str, Any] | None, found: Calibrated) -> dict[str, Any]:
    """The deployment's model with `found`'s inputs (each replaces the input of its name: calibration wins over
    discovery; the operator's explicit values stay the operator's in `build_model`)."""
    old = dict(model or {})
    inputs = {k: dict(v) for k, v in (old.get("inputs") or {}).items() if isinstance(v, Mapping)}
    inputs.update({k: dict(v) for k, v in found.inputs.items()})
    readings = {**(old.get("readings") or {}), "calibration": found.readings}
    return {**old, "inputs": inputs, "readings": readings,
            "calibration": {"at": found.at, "notes": list(found.notes)}}


def calibrate_deployment(db: Database, settings: Settings, deployment_id: int, *,
                         log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Calibrate deployment `deployment_id` and store the inputs in one transaction; raises DiscoveryFailed
    (nothing written)."""
    with db.session() as s:
        row = s.get(DeploymentRow, deployment_id)
        if row is None:
            raise Missing(f"deployment {deployment_id} not found", field="deployment_id")
        name, kind = row.name, row.kind
        target = Target.of(row, Egress())
        grant = granted(s, deployment_id, PASSWORD)
    try:
        egress = Egress.of(settings).bound(grant)
    except EgressRefused as exc:
        raise DiscoveryFailed(str(exc), permanent=True) from None
    found = operations(kind).calibrate(replace(target, egress=egress), settings, log=log)
    with db.session() as s:
        row = s.scalar(select(DeploymentRow).where(DeploymentRow.id == deployment_id).with_for_update())
        if row is None:
            raise Missing(f"deployment {deployment_id} was deleted during its calibration", field="deployment_id")
        model = merge_calibration(row.model, found)
        try:
            check_model_size(model, settings.model_max_bytes)
        except ModelTooLarge as exc:
            raise DiscoveryFailed(f"{kind}: {exc}", permanent=True) from None
        row.model = model
        s.flush()
    for note in found.notes:
        log(f"note: {note}")
    out = {"deployment": name, "kind": kind, "at": found.at, "inputs": found.inputs, "notes": found.notes}
    if "client" in found.readings:  # which client measured the client path: `{"driver", "how"}`
        out["client"] = found.readings["client"]
    figures = (found.readings.get("capacity") or {}).get("figures")
    if figures:  # each `{value, interval, source, how}` (docs/model.md § Capacity)
        out["capacity"] = figures
    return out
