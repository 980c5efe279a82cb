"""A memcached deployment's model: the `MemcachedDeployment` options (`simulation.memcached`) a tune replays — its
connection's servers as a sharded pool (hashed as tailtune-client hashes them), the worker threads its
`topology.slots` declares (memcached's `-t`: the requests one server serves at once) or discovery read, the client
overhead calibration (or discovery's profile) measured; else the Chisel paper's pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control.kind import ModelInputs
from simulation.memcached import MemcachedDeployment

__all__ = ["INPUTS", "model_options", "shown_topology"]

#: The inputs of a memcached deployment's model, each a row of `tuned_for.model_sources`.
INPUTS = ("servers", "worker_threads", "client_overhead", "arrivals")


def model_options(b: ModelInputs, connection: Mapping[str, Any], timestamps: bool) -> dict[str, Any]:
    """The `MemcachedDeployment` options of the deployment (module doc), each input recorded in `b`."""
    d = MemcachedDeployment()
    servers = [str(s) for s in connection.get("servers") or []]
    opts: dict[str, Any] = {}
    if servers:
        opts.update(servers=len(servers), pool="sharded", server_addresses=",".join(servers))
        b.set("servers", servers, "declared", how="connection.servers, hashed as tailtune-client hashes them")
    else:
        b.set("servers", d.servers, "default", how="the Chisel paper's pool")
    opts["worker_threads"] = int(b.pick("worker_threads", "slots", d.worker_threads, "memcached's default -t 4"))
    overhead = b.pick("client_overhead", None, d.client_overhead_us, "no client cost")
    opts["client_overhead_us"] = float(overhead["us"] if isinstance(overhead, Mapping) else overhead)
    b.set("arrivals", "the trace's own arrival times" if timestamps else "back to back",
          "trace" if timestamps else "default", how="the trace's ts column")
    return opts



def shown_topology(options: Mapping[str, Any], sources: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """A memcached deployment's topology is its servers (its connection's), and its worker threads as `slots`
    where the deployment declares them; the Cassandra-only fields are not shown."""
    topology: dict[str, Any] = {"servers": options.get("servers", 1)}
    shown = {"topology.servers": sources["servers"]}
    if sources.get("worker_threads") == "declared":
        topology["slots"] = options["worker_threads"]
        shown["topology.slots"] = "declared"
    return topology, shown
