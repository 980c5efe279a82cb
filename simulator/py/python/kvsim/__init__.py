"""kvsim: Python interface to the tailtune replay simulator (Rust core).

The Cassandra-like engine: build a `Cluster` and a `Workload` (materialized once per seed), then
`replay(workload, ReplayConfig(...)) -> Result`. The catalogue (`policy_specs()`, `replica_specs()`) lists every
policy and replica selector with its parameters' defaults, valid ranges and search ranges. The memcached engine:
`kvsim.memcached.replay(sizes, arrivals, MemcachedConfig(...)) -> MemcachedResult`, its analyzer in
`kvsim.chisel`. Model choices: docs/simulator.md.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from kvsim._kvsim import KvsimError, ParameterError, RingError, WorkloadError, model_version
from kvsim.catalogue import (
    ClusterConfig,
    ParamSpec,
    PolicySpec,
    SearchSpec,
    cluster_defaults,
    coordinator_defaults,
    coordinator_spec,
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

if TYPE_CHECKING:
    from kvsim.demand import DemandModel, default_thr_l, fill_unknown_sizes
    from kvsim.memcached import MemcachedConfig, MemcachedResult
    from kvsim.models import ClosedLoop, ServerModel, Slowdown, write_flags
    from kvsim.replay import (
        BloomInfo,
        Cluster,
        ReplayConfig,
        Result,
        Workload,
        WorkloadLayout,
        replay,
        tokens_for_keys,
        tokens_for_utf8,
    )
    from kvsim.ring import Ring, RingNode

#: Names loaded on first use (they need numpy), so that the catalogue above costs the CLI's help only the
#: native module.
_LAZY = {
    "DemandModel": "kvsim.demand", "default_thr_l": "kvsim.demand", "fill_unknown_sizes": "kvsim.demand",
    "MemcachedConfig": "kvsim.memcached", "MemcachedResult": "kvsim.memcached",
    "ClosedLoop": "kvsim.models", "ServerModel": "kvsim.models", "Slowdown": "kvsim.models",
    "write_flags": "kvsim.models",
    "Ring": "kvsim.ring", "RingNode": "kvsim.ring",
    "BloomInfo": "kvsim.replay", "Cluster": "kvsim.replay", "ReplayConfig": "kvsim.replay",
    "Result": "kvsim.replay", "Workload": "kvsim.replay", "WorkloadLayout": "kvsim.replay",
    "replay": "kvsim.replay",
    "tokens_for_keys": "kvsim.replay",
    "tokens_for_utf8": "kvsim.replay",
}


#: Submodules reachable as attributes (`kvsim.memcached.replay`, `kvsim.models.THINK_DISTS`, ...).
_SUBMODULES = ("chisel", "demand", "memcached", "models", "ring", "types")


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None and name in _SUBMODULES:
        module = f"kvsim.{name}"
    if module is None:
        raise AttributeError(f"module 'kvsim' has no attribute {name!r}")
    import importlib

    importlib.import_module(module)
    # Bind every name of every submodule loaded so far: loading `kvsim.replay` sets the attribute `replay` to
    # the submodule, which must not hide the function of the same name.
    for n, m in _LAZY.items():
        if m in sys.modules:
            globals()[n] = getattr(sys.modules[m], n)
    return globals()[name] if name in _LAZY else sys.modules[module]


__all__ = [
    "BloomInfo",
    "ClosedLoop",
    "Cluster",
    "ClusterConfig",
    "DemandModel",
    "KvsimError",
    "MemcachedConfig",
    "MemcachedResult",
    "ParamSpec",
    "ParameterError",
    "PolicySpec",
    "ReplayConfig",
    "Result",
    "Ring",
    "RingError",
    "RingNode",
    "SearchSpec",
    "ServerModel",
    "Slowdown",
    "Workload",
    "WorkloadError",
    "WorkloadLayout",
    "cluster_defaults",
    "coordinator_defaults",
    "coordinator_spec",
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
    "tokens_for_utf8",
    "write_flags",
]
