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

A Cassandra trace with timestamps is replayed on its own arrival times (`arrivals` from the `trace`; the load is
what it offers the model's capacity, reported as `offered_load`); a what-if `load` replaces them with Poisson
arrivals at that load (`declared`).

The deployment row keeps what discovery and calibration found in its `model` column:
`{"inputs": {name: {"value": ..., "source": "discovered"|"calibrated", "at": epoch_s, "how": text}},
"readings": {...}, "declared": [topology fields given explicitly]}`. `build_model` turns the row into the
evaluator's options and the sources recorded in the recommendation's `tuned_for.model_sources`. A model stored
under the key's former name, `operator`, is read the same.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CASSANDRA_INPUTS",
    "INPUT_RANGES",
    "LOGNORMAL_MIN_SIGMA",
    "MEMCACHED_INPUTS",
    "SOURCES",
    "TOPOLOGY_FIELDS",
    "DeploymentModel",
    "InputRange",
    "ModelTooLarge",
    "build_model",
    "check_input",
    "check_model_size",
    "declared_fields",
    "shown_topology",
    "topology_default",
]

#: Where a model input came from (`trace`: the arrival times of the trace being tuned).
SOURCES = ("declared", "calibrated", "discovered", "default", "trace")
#: The inputs of a Cassandra deployment's model, each a row of `tuned_for.model_sources`.
CASSANDRA_INPUTS = (
    "servers", "slots", "replication", "service_time", "network", "client_key", "ring", "arrivals",
)
#: The inputs of a memcached deployment's model.
MEMCACHED_INPUTS = ("servers", "worker_threads", "client_overhead", "arrivals")
#: The smallest lognormal shape kvsim replays (`demand_sigma` in (0, 10], checked from 1e-6); a calibrated σ
#: below it is replayed as deterministic demands.
LOGNORMAL_MIN_SIGMA = 1e-6
#: The API's topology fields (their names are contracts) → the model input each sets, the `CassandraDeployment`
#: field it is and the factor from the topology's unit to the field's: the one map between the two sets of names.
TOPOLOGY_FIELDS: dict[str, tuple[str, str, float]] = {
    "servers": ("servers", "servers", 1.0),
    "slots": ("slots", "slots", 1.0),
    "replication": ("replication", "replication", 1.0),
    "service_rate_per_s": ("service_time", "service_rate", 1.0),
    "network_ms": ("network", "net_latency_us", 1000.0),
}
_TOPOLOGY_INPUT = {name: model_input for name, (model_input, _, _) in TOPOLOGY_FIELDS.items()}


def topology_default(name: str) -> Any:
    """The model's default of topology field `name`, in the topology's unit: `CassandraDeployment`'s (the
    simulator's), so the API states no default of its own."""
    from simulation.cassandra import CassandraDeployment

    return _in_topology_unit(name, CassandraDeployment.__dataclass_fields__[TOPOLOGY_FIELDS[name][1]].default)


def _in_topology_unit(name: str, value: Any) -> Any:
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


#: The ranges of the model inputs: one declaration for what an operator sets (the API's topology,
#: `control/deployment_spec.py`) and what discovery and calibration read from a live system
#: (`control.discovery`, `control.calibration`), so neither can store a value the other refuses.
INPUT_RANGES: dict[str, InputRange] = {
    "servers": InputRange(1, 100_000, True),
    "slots": InputRange(1, 1024, True),
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
    return sorted(n for n in names if n in _TOPOLOGY_INPUT and topology.get(n) is not None)


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


def _found(model: Mapping[str, Any], name: str, source: str) -> dict[str, Any] | None:
    entry = (model.get("inputs") or {}).get(name)
    if isinstance(entry, Mapping) and entry.get("source") == source and entry.get("value") is not None:
        return dict(entry)
    return None


class _Builder:
    def __init__(self, topology: Mapping[str, Any], model: Mapping[str, Any]) -> None:
        self.topology = topology
        self.model = model
        ops = model.get("declared", model.get("operator"))  # `operator`: the key's former name
        self.declared = set(ops) if isinstance(ops, list) else set(declared_fields(topology))
        self.sources: dict[str, str] = {}
        self.inputs: dict[str, dict[str, Any]] = {}
        self.notes: list[str] = []

    def pick(self, name: str, topo_field: str | None, default: Any, how_default: str) -> Any:
        """The value of input `name`: the declared topology field, else calibrated, else discovered, else the
        default; records its source."""
        if topo_field is not None and topo_field in self.declared and self.topology.get(topo_field) is not None:
            value = self.topology[topo_field]
            self.set(name, value, "declared", how=f"topology.{topo_field}")
            return value
        for source in ("calibrated", "discovered"):
            entry = _found(self.model, name, source)
            if entry is not None:
                self.inputs[name] = entry
                self.sources[name] = source
                return entry["value"]
        self.set(name, default, "default", how=how_default)
        return default

    def set(self, name: str, value: Any, source: str, *, how: str, at: float | None = None) -> None:
        self.sources[name] = source
        self.inputs[name] = {"value": value, "source": source, "at": at, "how": how}


def _cassandra(b: _Builder, timestamps: bool, load: float | None) -> dict[str, Any]:
    from base.errors import BadInputError
    from simulation.cassandra import CassandraDeployment, client_key, client_rtt, ring_size

    d = CassandraDeployment()
    opts: dict[str, Any] = {
        "servers": int(b.pick("servers", "servers", d.servers, "Rein's cluster")),
        "slots": int(b.pick("slots", "slots", d.slots, f"Rein's {d.slots} slots per server")),
        "replication": int(b.pick("replication", "replication", d.replication, f"RF {d.replication}")),
    }
    service = b.pick("service_time", "service_rate_per_s", None, f"{d.service_rate:g} ops/s per slot, exponential")
    if isinstance(service, int | float):  # the declared rate (ops/s per slot)
        opts["service_rate"] = float(service)
    elif isinstance(service, Mapping):  # calibrated: {"mean_ms", "dist", "sigma"}
        opts["service_rate"] = 1000.0 / float(service["mean_ms"])
        if service.get("dist") == "lognormal" and service.get("sigma") is not None:
            sigma = float(service["sigma"])
            if sigma >= LOGNORMAL_MIN_SIGMA:
                opts["demand_dist"], opts["demand_sigma"] = "lognormal", sigma
            else:  # no spread resolved beyond the trivial requests': the lognormal's σ → 0 limit
                opts["demand_dist"] = "deterministic"
                b.notes.append(f"the calibrated service time has no spread beyond the client's noise (σ {sigma:g}): "
                               "it is replayed as deterministic, the lognormal's limit")
    network = b.pick("network", "network_ms", None, f"{d.net_latency_us:g} µs one way")
    if isinstance(network, int | float):
        opts["net_latency_us"] = float(network) * 1000.0
    elif isinstance(network, Mapping):  # calibrated: {"one_way_ms", "rtt_quantiles_ms"}
        opts["net_latency_us"] = float(network["one_way_ms"]) * 1000.0
        if network.get("rtt_quantiles_ms") is not None:  # the round trip's spread, replayed as measured
            opts["client_rtt_ms"] = client_rtt(network["rtt_quantiles_ms"], "the calibrated network")
    key = b.pick("client_key", None, None, "no per-partition client cost")
    if isinstance(key, Mapping):  # calibrated: {"us"}, per partition of a request beyond the first
        us = client_key(key.get("us"), "the calibrated client_key", "us")
        if us > 0:
            opts["client_key_us"] = us
    ring = _found(b.model, "ring", "discovered")
    size, problem = None, None
    if ring is not None:
        try:
            size = ring_size(ring["value"])
        except BadInputError as exc:
            problem = str(exc)
    if ring is not None and size == (opts["servers"], opts["replication"]):
        b.inputs["ring"], b.sources["ring"] = ring, "discovered"
        opts["ring"] = ring["value"]
    else:
        if problem is not None:
            b.notes.append(f"the discovered ring cannot be replayed ({problem}): evenly spaced tokens are replayed "
                           "instead")
        elif size is not None:
            b.notes.append(f"the discovered ring has {size[0]} nodes and RF {size[1]} in its local datacenter but "
                           f"the model {opts['servers']} servers and RF {opts['replication']}: evenly spaced tokens "
                           "are replayed instead")
        b.set("ring", None, "default", how="evenly spaced tokens, replicas the next servers clockwise")
    if load is not None:
        opts["load"] = float(load)
        b.set("arrivals", f"Poisson at load {load:g}", "declared", how="--load (a what-if)")
    elif timestamps:
        opts["use_timestamps"], opts["load"] = True, None
        b.set("arrivals", "the trace's own arrival times", "trace", how="the trace's ts column")
    else:
        b.set("arrivals", f"Poisson at load {d.load:g}", "default", how="the trace has no timestamps")
    return opts


def _memcached(b: _Builder, connection: Mapping[str, Any], timestamps: bool) -> dict[str, Any]:
    from simulation.memcached import MemcachedDeployment

    d = MemcachedDeployment()
    servers = [str(s) for s in connection.get("servers") or []]
    opts: dict[str, Any] = {}
    if servers:
        opts.update(servers=len(servers), pool="sharded", server_addresses=",".join(servers))
        b.set("servers", servers, "declared", how="connection.servers, hashed as tailtune-client hashes them")
    else:
        b.set("servers", d.servers, "default", how="the Chisel paper's pool")
    opts["worker_threads"] = int(b.pick("worker_threads", None, d.worker_threads, "memcached's default -t 4"))
    overhead = b.pick("client_overhead", None, d.client_overhead_us, "no client cost")
    opts["client_overhead_us"] = float(overhead["us"] if isinstance(overhead, Mapping) else overhead)
    b.set("arrivals", "the trace's own arrival times" if timestamps else "back to back",
          "trace" if timestamps else "default", how="the trace's ts column")
    return opts


def build_model(
    kind: str,
    topology: Mapping[str, Any],
    connection: Mapping[str, Any],
    model: Mapping[str, Any] | None,
    *,
    timestamps: bool,
    load: float | None = None,
) -> DeploymentModel:
    """The model a tune of this deployment replays. `timestamps`: the trace has arrival times; `load`: a what-if
    offered load that replaces them (Cassandra)."""
    b = _Builder(topology, model or {})
    opts = _cassandra(b, timestamps, load) if kind == "cassandra" else _memcached(b, connection, timestamps)
    order = CASSANDRA_INPUTS if kind == "cassandra" else MEMCACHED_INPUTS
    sources = {name: b.sources[name] for name in order if name in b.sources}
    inputs = {name: b.inputs[name] for name in order if name in b.inputs}
    return DeploymentModel(kind, opts, sources, inputs, b.notes)


def shown_topology(
    kind: str, topology: Mapping[str, Any], connection: Mapping[str, Any], model: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The topology a deployment's answer shows — the values its tune replays (the operator's, else calibrated,
    else discovered, else the model's default) — and the source of each (`topology.<field>` → source). A
    memcached deployment's topology is its servers (its connection's); the Cassandra-only fields are not shown."""
    m = build_model(kind, topology, connection, model, timestamps=False)
    o = m.options
    if kind != "cassandra":
        return {"servers": o.get("servers", 1)}, {"topology.servers": m.sources["servers"]}
    values = {name: _in_topology_unit(name, o[field_name]) if field_name in o else topology_default(name)
              for name, (_, field_name, _) in TOPOLOGY_FIELDS.items()}
    return values, {f"topology.{k}": m.sources[_TOPOLOGY_INPUT[k]] for k in values}
