"""kvsim: Python interface to the tailtune replay simulator (Rust core).

The Cassandra-like engine: build a `Cluster` and a `Workload` (materialized once per seed), then
`replay(workload, ReplayConfig(...)) -> Result`. The catalogue (`policy_specs()`, `replica_specs()`) lists every
policy and replica selector with its parameters' defaults, valid ranges and search ranges. The memcached engine:
`kvsim.memcached.replay(sizes, arrivals, MemcachedConfig(...)) -> MemcachedResult`, its analyzer in
`kvsim.chisel`. Model choices: docs/simulator.md.
"""

from __future__ import annotations

from kvsim._kvsim import model_version
from kvsim.catalogue import (
    ParamSpec,
    PolicySpec,
    SearchSpec,
    memcached_policy_specs,
    policy_defaults,
    policy_names,
    policy_spec,
    policy_specs,
    replica_defaults,
    replica_names,
    replica_spec,
    replica_specs,
)
from kvsim.demand import DemandModel, default_thr_l, fill_unknown_sizes
from kvsim.memcached import MemcachedConfig, MemcachedResult
from kvsim.models import ClosedLoop, ServerModel, Slowdown, write_flags
from kvsim.replay import (
    BloomInfo,
    Cluster,
    KvsimError,
    ParameterError,
    ReplayConfig,
    Result,
    Workload,
    WorkloadError,
    replay,
    tokens_for_keys,
)

__all__ = [
    "BloomInfo",
    "ClosedLoop",
    "Cluster",
    "DemandModel",
    "KvsimError",
    "MemcachedConfig",
    "MemcachedResult",
    "ParamSpec",
    "ParameterError",
    "PolicySpec",
    "ReplayConfig",
    "Result",
    "SearchSpec",
    "ServerModel",
    "Slowdown",
    "Workload",
    "WorkloadError",
    "default_thr_l",
    "fill_unknown_sizes",
    "memcached_policy_specs",
    "model_version",
    "policy_defaults",
    "policy_names",
    "policy_spec",
    "policy_specs",
    "replay",
    "replica_defaults",
    "replica_names",
    "replica_spec",
    "replica_specs",
    "tokens_for_keys",
    "write_flags",
]
