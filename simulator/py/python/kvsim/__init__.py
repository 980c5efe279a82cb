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
