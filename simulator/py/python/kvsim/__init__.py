"""kvsim: Python interface to the tailtune replay simulator (Rust core)."""

from __future__ import annotations

from kvsim._kvsim import model_version
from kvsim.chisel import replay_memcached  # memcached deployment kind (issue 5)
from kvsim.replay import (
    Cluster,
    KvsimError,
    ParameterError,
    Result,
    Workload,
    WorkloadError,
    policy_defaults,
    policy_names,
    tokens_for_keys,
)

__all__ = ["model_version"]
__all__ += ["replay_memcached"]
__all__ += [
    "Cluster",
    "KvsimError",
    "ParameterError",
    "Result",
    "Workload",
    "WorkloadError",
    "policy_defaults",
    "policy_names",
    "tokens_for_keys",
]

# issue 4: size-aware demand, replica selection
from kvsim.demand import DemandModel, default_thr_l, fill_unknown_sizes  # noqa: E402
from kvsim.replicas import SizedResult, replay_sized, replica_defaults, replica_names  # noqa: E402

__all__ += ["DemandModel", "default_thr_l", "fill_unknown_sizes"]
__all__ += ["SizedResult", "replay_sized", "replica_defaults", "replica_names"]

# issue 4: server speeds and slowdowns, read/write mix, closed-loop clients
from kvsim.models import ClosedLoop, ServerModel, Slowdown, write_flags  # noqa: E402

__all__ += ["ClosedLoop", "ServerModel", "Slowdown", "write_flags"]
