"""Typed shapes of what a replay reports: the JSON-like parts of `kvsim.Result` (TypedDicts, so that
`Result.to_json()` writes them as they are) and the JSON value type of `to_json()`."""

from __future__ import annotations

from typing import Required, TypeAlias, TypedDict

import numpy as np
import numpy.typing as npt

__all__ = [
    "BloomJson",
    "ClassSummary",
    "ClosedInfo",
    "CopiesInfo",
    "DemandInfo",
    "HeldInfo",
    "JsonValue",
    "OpRecords",
    "ServersInfo",
    "SlowdownInfo",
    "StallScheduleInfo",
    "TimeoutsInfo",
    "WritesInfo",
]

#: A JSON value (what `Result.to_json()` and the other `to_json` methods produce).
JsonValue: TypeAlias = "str | int | float | bool | list[JsonValue] | dict[str, JsonValue] | None"


class HeldInfo(TypedDict):
    """Opsets held at the clients by the replica selector (C3's backlog, Héron's blocked large requests)."""

    opsets: int  # held at least once
    max: int  # most held at once
    mean_ms: float  # mean hold time of the held ones
    at_half: int  # held when the middle request arrived
    at_end: int  # held when the last request arrived
    unstable: bool  # the backlog keeps growing (≥ 10 at the end and ≥ 1.5× the middle)


class CopiesInfo(TypedDict):
    """duplicate / speculative: op copies sent, and copies whose answer came first."""

    ops: int
    wins: int


class TimeoutsInfo(TypedDict):
    """Read timeouts (Cassandra's coordinator: `stock`, or a policy given coordinator knobs): requests answered
    with a timeout (their latency is the read timeout), and reads their replica dropped unserved because they
    had outlived the read timeout (Cassandra's dropped READ messages)."""

    requests: int
    dropped_reads: int


class WritesInfo(TypedDict, total=False):
    """Writes (served at every replica, answered by the first): write ops and their extra replica copies. A
    caller may add how the writes were chosen (`source`, `fraction`) before reporting."""

    source: str
    fraction: float
    ops: Required[int]
    copies: Required[int]


class SlowdownInfo(TypedDict):
    interval_ms: float
    fraction: float
    factor: float
    duration_ms: float


class StallsInfo(TypedDict):
    """Transient stop-the-world stalls: per second per server, and their length."""

    rate_per_s: float
    ms: float


class StallScheduleInfo(TypedDict):
    """Stalls on an explicit schedule: how many intervals, on which servers, their total length, the first start
    and the last end (ms on the replay's clock)."""

    intervals: int
    servers: list[int]
    stalled_ms: float
    first_ms: float
    last_ms: float


class ServersInfo(TypedDict, total=False):
    """Server speeds / slowdowns actually used."""

    capacity_factor: Required[float]  # time-averaged capacity relative to every server at speed 1
    speeds: list[float]
    slow_servers: int
    slowdown: SlowdownInfo
    stalls: StallsInfo
    stall_schedule: StallScheduleInfo


class ClosedInfo(TypedDict):
    """Closed-loop clients and the throughput they reached."""

    threads: int
    think_ms: float
    think_dist: str
    throughput_rps: float
    ops_per_s: float
    makespan_s: float


class DemandInfo(TypedDict, total=False):
    """How the workload's op demands were made (reported as given; the replay does not read it)."""

    dist: str
    sigma: float
    model: str
    mean_us: float
    t0_us: float
    bandwidth_bps: float
    median_bytes: float
    unknown_sizes: int


class ClassSummary(TypedDict, total=False):
    """Latency of the requests of one size class (touching a large value or not), after the warm-up cut."""

    requests: Required[int]
    p50_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float
    mean_ms: float


class BloomJson(TypedDict):
    thr_l_bytes: float
    large_keys: int
    bits: int
    hashes: int
    fp_target: float
    fp_measured: float


class OpRecords(TypedDict):
    """Per-op record (`record_ops=True`), indexed like the workload's ops; times in ns."""

    request: npt.NDArray[np.uint32]
    opset: npt.NDArray[np.uint32]
    server: npt.NDArray[np.uint32]
    slot: npt.NDArray[np.uint32]
    enqueue_ns: npt.NDArray[np.uint64]
    start_ns: npt.NDArray[np.uint64]
    end_ns: npt.NDArray[np.uint64]
    demand_ns: npt.NDArray[np.uint64]
