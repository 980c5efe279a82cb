"""A Cassandra deployment's model: the `CassandraDeployment` options (`simulation.cassandra`) a tune replays, from
what the deployment declares (its topology), what calibration measured (service time, network, per-partition
client cost) and what discovery read (nodes, replication, `concurrent_reads`, the ring); the rest is Rein's
cluster, the simulator's default.

A trace with timestamps is replayed on its own arrival times (`arrivals` from the `trace`; the load is what it
offers the model's capacity, reported as `offered_load`); a what-if `load` replaces them with Poisson arrivals at
that load (`declared`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from base.errors import BadInputError
from control.kind import ModelInputs
from control.model import TOPOLOGY_FIELDS, TOPOLOGY_INPUT, in_topology_unit, topology_default
from simulation.cassandra import CassandraDeployment, client_key, client_rtt, ring_size

__all__ = ["INPUTS", "LOGNORMAL_MIN_SIGMA", "model_options", "shown_topology"]

#: The inputs of a Cassandra deployment's model, each a row of `tuned_for.model_sources`.
INPUTS = ("servers", "slots", "replication", "service_time", "capacity", "network", "client_key", "ring", "host",
          "pauses", "arrivals")
#: The smallest lognormal shape kvsim replays (`demand_sigma` in (0, 10], checked from 1e-6); a calibrated σ
#: below it is replayed as deterministic demands.
LOGNORMAL_MIN_SIGMA = 1e-6


def model_options(b: ModelInputs, timestamps: bool, load: float | None) -> dict[str, Any]:
    """The `CassandraDeployment` options of the deployment (module doc), each input recorded in `b`."""
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
    _capacity(b, opts, _host(b))
    _pauses(b, opts)
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
    ring = b.found("ring", "discovered")
    size, problem = None, None
    if ring is not None:
        try:
            size = ring_size(ring["value"])
        except BadInputError as exc:
            problem = str(exc)
    if ring is not None and size == (opts["servers"], opts["replication"]):
        b.use("ring", ring)
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



def _host(b: ModelInputs) -> tuple[float, int] | None:
    """(host cores, nodes per host) of the calibrated `host` input (`kinds.cassandra.capacity.shared_host`),
    recorded; None (recorded as the default: each node its own cores) when there is none or it is not two positive
    numbers."""
    entry = b.found("host", "calibrated")
    value = entry.get("value") if entry is not None else None
    if entry is not None and isinstance(value, Mapping):
        cores, nodes = _number(value.get("host_cores")), value.get("nodes_per_host")
        if (cores is not None and cores > 0 and isinstance(nodes, int) and not isinstance(nodes, bool)
                and nodes >= 1):
            b.use("host", entry)
            return cores, nodes
        b.notes.append(f"the calibrated host ({value!r}) is not a number of cores and of nodes: each node is "
                       "taken to have its own cores")
    b.set("host", None, "default", how="not measured: each node has its own cores (capacity.cores)")
    return None


def _capacity(b: ModelInputs, opts: dict[str, Any], host: tuple[float, int] | None) -> None:
    """The calibrated capacity (`kinds.cassandra.capacity`) sets the model's servers so that they saturate where
    the node does (docs/model.md § Capacity). Keeping the service time (what a read spends inside the node at low
    load), the slots are the node's single-partition requests a second at saturation × that time (the reads in
    service at once when the node is full), at least 1 and at most the node's `slots`. A node's cores are its
    JVM's `cores`, or its share of a host that several nodes share (`host`: host_cores / nodes_per_host, when
    fewer), and its free cores those less its background. Where the fit separates a request's CPU from a
    partition read's (`cpu_per_request_us` ≥ 0, `cpu_per_read_us` > 0, free cores > 0), a slot reads partitions
    at free / cpu_per_read / slots a second and each request adds slots × cpu_per_request / free of a slot's time
    once (`request_demand_us`, on its first partition read's server): a k-partition request costs the servers
    what it costs the node, cpu_per_request + k × cpu_per_read. Otherwise the per-slot rate is the
    single-partition capacity (scaled to a shared host's free cores) over the slots (every partition charged a
    whole request, a note). An operator's declared slots or service rate stay the operator's: the capacity is then not
    applied (a note)."""
    entry = b.found("capacity", "calibrated")
    value = entry.get("value") if entry is not None else None
    rate = _number(value.get("requests_per_s")) if isinstance(value, Mapping) else None
    if entry is None or not isinstance(value, Mapping) or rate is None or not 0 < rate < float("inf"):
        if b.source("slots") == "declared" and b.source("service_time") == "declared":
            b.set("capacity", None, "declared", how="slots × the service rate, both declared")
        else:
            b.set("capacity", None, "default", how="not measured: a server's capacity is its slots × the service "
                  "rate")
        return
    declared = [n for n in ("slots", "service_time") if b.source(n) == "declared"]
    if declared:
        b.set("capacity", None, "declared", how=f"slots × the service rate: {' and '.join(declared)} declared")
        b.notes.append(f"the calibrated capacity ({rate:,.0f} requests/s a node) is not applied: the deployment "
                       f"declares {' and '.join(declared)}")
        return
    b.use("capacity", entry)
    per_request, per_read = _number(value.get("cpu_per_request_us")), _number(value.get("cpu_per_read_us"))
    cores, background = _number(value.get("cores")), _number(value.get("background_cores"))
    free = cores - background if cores is not None and background is not None else None
    if host is not None and host[1] > 1 and cores is not None and background is not None:
        share = min(cores, host[0] / host[1])
        if share < cores:  # the node's share of the shared host: the rate at saturation falls with its free cores
            shared = share - background
            b.notes.append(f"{host[1]} nodes share a host of {host[0]:g} cores: each node has {share:.3g} of "
                           f"them, {shared:.3g} beyond its background {background:.3g} (alone: {free:.3g})")
            if free is not None and free > 0:
                rate *= max(shared, 0.0) / free
            free = shared
            if not rate > 0:
                b.notes.append("no core is left to the requests on a node's share of the host: the calibrated "
                               "capacity is not applied")
                b.set("capacity", None, "default", how="not applied: no free core on a node's share of the host")
                return
    service_s = 1.0 / float(opts.get("service_rate") or CassandraDeployment().service_rate)
    slots = max(1, min(int(opts["slots"]), round(rate * service_s)))
    before = (int(opts["slots"]), float(opts.get("service_rate") or CassandraDeployment().service_rate))
    opts["slots"] = slots
    if (per_request is not None and per_read is not None and free is not None and per_request >= 0
            and per_read > 0 and free > 0):
        opts["service_rate"] = free / (per_read * 1e-6) / slots
        if per_request > 0:
            opts["request_demand_us"] = slots * per_request / free
        b.notes.append(
            f"the calibrated capacity sets the servers: {slots} slots reading a partition in "
            f"{1e3 / opts['service_rate']:.4g} ms (cpu_per_read {per_read:.4g} µs on {free:.3g} free cores) plus "
            f"{opts.get('request_demand_us', 0.0):.4g} µs once a request (cpu_per_request {per_request:.4g} µs): "
            f"{rate:,.0f} single-partition requests/s a node, {free / ((per_request + 4 * per_read) * 1e-6):,.0f} "
            f"4-partition ones (were {before[0]} slots of {1e3 / before[1]:.4g} ms, {before[0] * before[1]:,.0f} "
            "partition reads/s): they saturate where the node does")
        return
    opts["service_rate"] = rate / slots
    b.notes.append(f"the calibrated capacity ({rate:,.0f} single-partition requests/s a node) sets the servers: "
                   f"{slots} slots of {1e3 / opts['service_rate']:.4g} ms (were {before[0]} of "
                   f"{1e3 / before[1]:.4g} ms, {before[0] * before[1]:,.0f}/s); the fit does not separate a "
                   "request's CPU from a partition read's, so every partition read is charged a whole "
                   "single-partition request")


def _pauses(b: ModelInputs, opts: dict[str, Any]) -> None:
    """The calibrated pauses (`kinds.cassandra.pauses`: the contact node's GC pauses) as every server's random
    stalls: `stall_rate` a second, `stall_ms` each; none measured (rate 0), no stalls; not calibrated, none (the
    default)."""
    entry = b.found("pauses", "calibrated")
    value = entry.get("value") if entry is not None else None
    if entry is None or not isinstance(value, Mapping):
        b.set("pauses", None, "default", how="not measured: no stalls (a what-if: --stall-rate, --stall-ms)")
        return
    rate, mean_ms = _number(value.get("rate_per_s")), _number(value.get("mean_ms"))
    if rate is None or rate < 0 or (rate > 0 and (mean_ms is None or mean_ms < 0)):
        b.notes.append(f"the calibrated pauses ({value!r}) are not a rate and a length: no stalls are replayed")
        b.set("pauses", None, "default", how="not replayable as calibrated: no stalls")
        return
    b.use("pauses", entry)
    if rate == 0 or not mean_ms:
        b.notes.append(f"no GC pause in the calibration's {_number(value.get('seconds')) or 0:.0f} s: no stalls "
                       "are replayed")
        return
    opts["stall_rate"], opts["stall_ms"] = rate, mean_ms
    b.notes.append(f"the calibrated GC pauses are every server's stalls: {rate:.3g} a second of {mean_ms:.3g} ms")


def _number(x: object) -> float | None:
    """`x` as a finite float, None when it is not a number (a bool is not)."""
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return None
    return float(x)


def shown_topology(options: Mapping[str, Any], sources: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Every API topology field (`TOPOLOGY_FIELDS`) as the model replays it, in the topology's unit, and its
    source."""
    values = {name: in_topology_unit(name, options[field_name]) if field_name in options else topology_default(name)
              for name, (_, field_name, _) in TOPOLOGY_FIELDS.items()}
    return values, {f"topology.{k}": sources[TOPOLOGY_INPUT[k]] for k in values}
