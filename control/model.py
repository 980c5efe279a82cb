"""The deployment is the model: what a tune of a deployment replays, built from the deployment itself.

Every input of the simulated cluster comes from one of four sources, in this order of precedence:

* `declared` — a value the deployment declares explicitly (its topology, its connection's servers), as whoever
  registered or updated it (a write token) gave it — a statement about the cluster, not a privilege;
* `calibrated` — measured by `tailtune deployments calibrate` (service times, network, per-partition client cost,
  client overhead);
* `discovered` — read from the live system by `tailtune deployments discover` (nodes, tokens, replication,
  `concurrent_reads`, memcached's threads);
* `default` — the simulator's default (Rein's cluster, the Chisel paper's pool): the model then rests on an
  assumption, and a tune says so.

The deployment row keeps what discovery and calibration found in its `model` column:
`{"inputs": {name: {"value": ..., "source": "discovered"|"calibrated", "at": epoch_s, "how": text}},
"readings": {...}, "declared": [topology fields given explicitly]}`. `build_model` turns the row into the
evaluator's options and the sources recorded in the recommendation's `tuned_for.model_sources`: which inputs a
kind's model has and how each becomes an option is the kind's (`DeploymentKind.model_options`, in
`kinds/<name>/model.py`); the precedence of the sources, the ranges of the inputs and the API's topology fields
are this module's. A model stored under the key's former name, `operator`, is read the same.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from control.kinds import operations

__all__ = [
    "INPUT_RANGES",
    "SOURCES",
    "TOPOLOGY_FIELDS",
    "TOPOLOGY_INPUT",
    "DeploymentModel",
    "InputRange",
    "ModelBuilder",
    "ModelTooLarge",
    "build_model",
    "check_input",
    "check_model_size",
    "declared_fields",
    "in_topology_unit",
    "shown_topology",
    "topology_default",
]

#: Where a model input came from (`trace`: the arrival times of the trace being tuned).
SOURCES = ("declared", "calibrated", "discovered", "default", "trace")
#: The API's topology fields (their names are contracts) → the model input each sets, the `CassandraDeployment`
#: field it is and the factor from the topology's unit to the field's: the one map between the two sets of names.
TOPOLOGY_FIELDS: dict[str, tuple[str, str, float]] = {
    "servers": ("servers", "servers", 1.0),
    "slots": ("slots", "slots", 1.0),
    "replication": ("replication", "replication", 1.0),
    "service_rate_per_s": ("service_time", "service_rate", 1.0),
    "network_ms": ("network", "net_latency_us", 1000.0),
}
#: topology field → the model input it sets.
TOPOLOGY_INPUT = {name: model_input for name, (model_input, _, _) in TOPOLOGY_FIELDS.items()}


def topology_default(name: str) -> Any:
    """The model's default of topology field `name`, in the topology's unit: `CassandraDeployment`'s (the
    simulator's), so the API states no default of its own."""
    from simulation.cassandra import CassandraDeployment

    return in_topology_unit(name, CassandraDeployment.__dataclass_fields__[TOPOLOGY_FIELDS[name][1]].default)


def in_topology_unit(name: str, value: Any) -> Any:
    """A `CassandraDeployment` field's `value` in topology field `name`'s unit."""
    factor = TOPOLOGY_FIELDS[name][2]
    return value if factor == 1.0 else value / factor


@dataclass(frozen=True)
class InputRange:
    """The values a model input may take: [low, high] (`low` excluded when `low_open`), whole when `integer`."""

    low: float
    high: float
    integer: bool
    low_open: bool = False

    def problem(self, value: object) -> str | None:
        """Why `value` is not in the range (None: it is)."""
        kind = "an integer" if self.integer else "a number"
        shown = repr(value) if not isinstance(value, str | bytes) or len(value) <= 40 else repr(value[:40]) + "…"
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"expected {kind}, got {shown}"
        if self.integer and not isinstance(value, int):
            return f"expected an integer, got {shown}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"expected a finite number, got {shown}"
        low_ok = value > self.low if self.low_open else value >= self.low
        if not low_ok or value > self.high:
            lo = "(" if self.low_open else "["
            hi = "]" if math.isfinite(self.high) else ")"
            bound = f"{self.high:g}" if math.isfinite(self.high) else "inf"
            shown = shown if len(shown) <= 40 else shown[:40] + "…"
            return f"{shown} is out of range {lo}{self.low:g}, {bound}{hi}"
        return None


#: Most service slots a modelled server has (kvsim's `ClusterConfig`: 1..=64).
MODEL_MAX_SLOTS = 64

#: The ranges of the model inputs: one declaration for what an operator sets (the API's topology,
#: `control/deployment_spec.py`) and what discovery and calibration read from a live system
#: (`control.discovery`, `control.calibration`), so neither can store a value the other refuses.
INPUT_RANGES: dict[str, InputRange] = {
    "servers": InputRange(1, 100_000, True),
    # the simulator's own bound (kvsim's `ClusterConfig` takes 1..=64 slots a server): a wider range here would be
    # accepted by the API and refused later, by the tune
    "slots": InputRange(1, MODEL_MAX_SLOTS, True),
    "replication": InputRange(1, 16, True),
    "service_rate_per_s": InputRange(0, math.inf, False, low_open=True),
    "network_ms": InputRange(0, 60_000, False),
    "worker_threads": InputRange(1, 1024, True),
    "client_overhead_us": InputRange(0, 1e6, False),
}


def check_input(name: str, value: object) -> str | None:
    """Why `value` is not a valid `name` (an `INPUT_RANGES` key), None when it is."""
    return INPUT_RANGES[name].problem(value)


class ModelTooLarge(ValueError):
    """What a live system reported would make the stored model larger than `TAILTUNE_MODEL_MAX_BYTES`."""


def check_model_size(model: Mapping[str, Any], max_bytes: int) -> None:
    """Refuse to store a model larger than `max_bytes` as JSON: a cluster (or a hostile endpoint posing as one)
    reporting a million peers or tokens must not fill the metadata database."""
    import json

    size = len(json.dumps(model, default=str).encode())
    if size > max_bytes:
        raise ModelTooLarge(
            f"what the live system reported makes the deployment's model {size:,} bytes, more than "
            f"TAILTUNE_MODEL_MAX_BYTES ({max_bytes:,}): check the contact points name the right cluster, or raise "
            "the setting"
        )


def declared_fields(topology: Mapping[str, Any], fields_set: set[str] | None = None) -> list[str]:
    """The topology fields the deployment declares: those given explicitly (`fields_set`), or — unknown — every
    field with a value."""
    names = fields_set if fields_set is not None else {k for k, v in topology.items() if v is not None}
    return sorted(n for n in names if n in TOPOLOGY_INPUT and topology.get(n) is not None)


@dataclass(frozen=True)
class DeploymentModel:
    """The evaluator's options of one deployment's tune and where each model input came from."""

    kind: str
    options: dict[str, Any]
    sources: dict[str, str]
    #: input name → {"value", "source", "at", "how"}: the record behind `sources`, for `tuned_for.model`
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def defaults(self) -> list[str]:
        """The inputs that rest on the simulator's defaults."""
        return [name for name, src in self.sources.items() if src == "default"]

    def warning(self, deployment: str) -> str | None:
        """One line for a job's result and logs when the model rests on defaults (None when it does not)."""
        rest = self.defaults()
        if not rest:
            return None
        return (f"the model of deployment {deployment!r} rests on the simulator's defaults for {', '.join(rest)}: "
                f"run `tailtune deployments discover {deployment}` (and calibrate), or set them in its topology")

    def record(self) -> dict[str, Any]:
        return {"sources": dict(self.sources), "inputs": dict(self.inputs), "notes": list(self.notes)}


class ModelBuilder:
    """The inputs of one model as they are read (`control.kind.ModelInputs`, what a kind's `model_options` is
    given): the deployment's topology, its stored model, the topology fields it declares."""

    def __init__(self, topology: Mapping[str, Any], model: Mapping[str, Any]) -> None:
        self.topology = topology
        self.model = model
        ops = model.get("declared", model.get("operator"))  # `operator`: the key's former name
        self.declared = set(ops) if isinstance(ops, list) else set(declared_fields(topology))
        self.sources: dict[str, str] = {}
        self.inputs: dict[str, dict[str, Any]] = {}
        self.notes: list[str] = []

    def found(self, name: str, source: str) -> dict[str, Any] | None:
        """The stored entry of input `name` when it came from `source` and has a value."""
        entry = (self.model.get("inputs") or {}).get(name)
        if isinstance(entry, Mapping) and entry.get("source") == source and entry.get("value") is not None:
            return dict(entry)
        return None

    def pick(self, name: str, topo_field: str | None, default: Any, how_default: str) -> Any:
        """The value of input `name`: the declared topology field, else calibrated, else discovered, else the
        default; records its source."""
        if topo_field is not None and topo_field in self.declared and self.topology.get(topo_field) is not None:
            value = self.topology[topo_field]
            self.set(name, value, "declared", how=f"topology.{topo_field}")
            return value
        for source in ("calibrated", "discovered"):
            entry = self.found(name, source)
            if entry is not None:
                self.use(name, entry)
                return entry["value"]
        self.set(name, default, "default", how=how_default)
        return default

    def use(self, name: str, entry: Mapping[str, Any]) -> None:
        """Record a stored entry as input `name`'s, with its own source."""
        self.inputs[name] = dict(entry)
        self.sources[name] = str(entry["source"])

    def source(self, name: str) -> str | None:
        return self.sources.get(name)

    def set(self, name: str, value: Any, source: str, *, how: str, at: float | None = None) -> None:
        self.sources[name] = source
        self.inputs[name] = {"value": value, "source": source, "at": at, "how": how}


def build_model(
    kind: str,
    topology: Mapping[str, Any],
    connection: Mapping[str, Any],
    model: Mapping[str, Any] | None,
    *,
    timestamps: bool,
    load: float | None = None,
) -> DeploymentModel:
    """The model a tune of this deployment replays: its kind's options (`DeploymentKind.model_options`), each input
    from the first source that has it. `timestamps`: the trace has arrival times; `load`: a what-if offered load
    that replaces them (where the kind models one). An unregistered kind is a BadInputError naming `kind`."""
    ops = operations(kind)
    b = ModelBuilder(topology, model or {})
    opts = ops.model_options(b, connection, timestamps=timestamps, load=load)
    sources = {name: b.sources[name] for name in ops.model_inputs if name in b.sources}
    inputs = {name: b.inputs[name] for name in ops.model_inputs if name in b.inputs}
    return DeploymentModel(kind, opts, sources, inputs, b.notes)


def shown_topology(
    kind: str, topology: Mapping[str, Any], connection: Mapping[str, Any], model: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The topology a deployment's answer shows — the values its tune replays (the operator's, else calibrated,
    else discovered, else the model's default) — and the source of each (`topology.<field>` → source), as its
    kind shows them (`DeploymentKind.shown_topology`)."""
    m = build_model(kind, topology, connection, model, timestamps=False)
    return operations(kind).shown_topology(m.options, m.sources)
