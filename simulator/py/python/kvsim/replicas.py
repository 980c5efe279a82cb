"""Replay with a replica selector and heterogeneous value sizes through the earlier two-type API.

compat: to be removed when callers switch to `kvsim.replay(workload, kvsim.ReplayConfig(...))`, whose `Result`
carries everything `SizedResult` does. Model choices: docs/simulator-replicas.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from kvsim.catalogue import replica_defaults, replica_names
from kvsim.models import ClosedLoop, ServerModel
from kvsim.replay import BloomInfo, ReplayConfig, Result, Workload, class_summary, replay
from kvsim.types import DemandInfo

__all__ = [
    "BloomInfo",
    "SizedResult",
    "class_summary",
    "replay_sized",
    "replica_defaults",
    "replica_names",
]

# `--policy NAME` shorthands: fifo server queues with that replica selection.
SHORTHANDS = ("c3", "ds", "heron")


@dataclass(frozen=True)
class SizedResult:
    """A replay with replica selection: the core `Result` plus the replica-selection figures.

    compat: to be removed when callers switch to `kvsim.replay`, whose `Result` holds these fields itself.
    """

    result: Result
    replica: str
    replica_params: dict[str, float]
    held: dict[str, Any]
    classes: dict[str, dict[str, Any]] | None = None
    bloom: BloomInfo | None = None
    demand: dict[str, Any] = field(default_factory=dict)
    # `--policy c3|ds|heron` shorthand: reported as the policy, with its selector's parameters as `params`.
    policy_label: str | None = None
    # duplicate / speculative: op copies sent (`ops`) and copies answered first (`wins`); zero otherwise.
    copies: dict[str, int] = field(default_factory=dict)
    # Server speeds / slowdowns actually used (None = every server at speed 1).
    servers: dict[str, Any] | None = None
    # Writes: {ops, copies} (+ what made them), None = reads only.
    writes: dict[str, Any] | None = None
    # Closed-loop clients: {threads, think_ms, think_dist, throughput_rps, ops_per_s, makespan_s}; None = open.
    closed: dict[str, Any] | None = None
    # Closed loop: when each request was issued (ms), in request order.
    arrival_ms: npt.NDArray[np.float64] | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        full = dataclasses.replace(
            self.result,
            replica=self.replica,
            replica_params=self.replica_params,
            held=cast(Any, self.held),
            copies=cast(Any, self.copies) if self.copies else None,
            classes=cast(Any, self.classes),
            bloom=self.bloom,
            demand=cast(Any, self.demand),
            servers=cast(Any, self.servers),
            writes=cast(Any, self.writes),
            closed=cast(Any, self.closed),
            policy_label=self.policy_label,
        )
        return full.to_json()


def replay_sized(
    workload: Workload,
    policy: str,
    params: Mapping[str, float] | None = None,
    *,
    replica: str = "round-robin",
    replica_params: Mapping[str, float] | None = None,
    sizes: npt.ArrayLike | None = None,
    thr_l_bytes: float | None = None,
    bloom_fp: float = 0.0001,
    warmup: float = 0.1,
    record_ops: bool = False,
    size_aware_cost: bool = False,
    seed: int = 0,
    demand: Mapping[str, Any] | None = None,
    servers: ServerModel | None = None,
    writes: npt.ArrayLike | None = None,
    closed: ClosedLoop | None = None,
) -> SizedResult:
    """Replays `workload` (whose input ops have value `sizes`, in input order) under `policy` with replica
    selector `replica`; the arguments are `ReplayConfig`'s.

    compat: to be removed when callers switch to `kvsim.replay(workload, kvsim.ReplayConfig(...))`.
    """
    cfg = ReplayConfig(
        policy=policy,
        params=dict(params or {}),
        replica=replica,
        replica_params=dict(replica_params or {}),
        sizes=None if sizes is None else np.asarray(sizes, dtype=np.float64),
        thr_l_bytes=thr_l_bytes,
        bloom_fp=bloom_fp,
        servers=servers,
        writes=None if writes is None else np.asarray(writes, dtype=np.bool_),
        closed=closed,
        warmup=warmup,
        record_ops=record_ops,
        size_aware_cost=size_aware_cost,
        seed=seed,
        demand=cast(DemandInfo, dict(demand or {})),
    )
    full = replay(workload, cfg)
    core = dataclasses.replace(
        full,
        replica=None,
        replica_params=None,
        held=None,
        copies=None,
        classes=None,
        bloom=None,
        demand=None,
        servers=None,
        writes=None,
        closed=None,
        arrival_ms=None,
    )
    return SizedResult(
        result=core,
        replica=str(full.replica),
        replica_params=dict(full.replica_params or {}),
        held=dict(full.held or {}),
        classes=None if full.classes is None else {k: dict(v) for k, v in full.classes.items()},
        bloom=full.bloom,
        demand=dict(full.demand or {}),
        copies={} if full.copies is None else {"ops": full.copies["ops"], "wins": full.copies["wins"]},
        servers=None if full.servers is None else dict(full.servers),
        writes=None if full.writes is None else dict(full.writes),
        closed=None if full.closed is None else dict(full.closed),
        arrival_ms=full.arrival_ms,
    )
