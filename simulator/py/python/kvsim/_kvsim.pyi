"""Native binding of kvsim-core (PyO3). The typed API is the `kvsim` package; these are its building blocks.

Arrays go in as contiguous numpy arrays of the stated dtype and come back as bytes (native endianness) that the
package wraps with `numpy.frombuffer`.
"""

from typing import Any, Protocol, Self, TypedDict, final

import numpy as np
import numpy.typing as npt

def model_version() -> int: ...

# ---- errors ------------------------------------------------------------------------------------------------
class KvsimError(ValueError):
    """Base of kvsim's errors (a ValueError)."""

class ParameterError(KvsimError):
    """A parameter is out of range or unknown; the message names it and the valid values."""

class RingError(ParameterError):
    """An explicit token ring is invalid; the message names the part at fault."""

class WorkloadError(KvsimError):
    """The workload arrays are inconsistent."""

# ---- cluster and workload ----------------------------------------------------------------------------------
def tokens_from_ids(ids: npt.NDArray[np.uint64]) -> bytes:
    """int64 ring tokens of integer key ids (Murmur3 of their 8 little-endian bytes)."""

def tokens_from_strings(keys: list[str]) -> bytes:
    """int64 ring tokens of string keys: Cassandra's Murmur3Partitioner token of their UTF-8 bytes."""

def tokens_from_utf8(offsets: npt.NDArray[np.int64], data: npt.NDArray[np.uint8]) -> bytes:
    """Ring tokens (int64 bytes) of UTF-8 keys `data[offsets[i]:offsets[i + 1]]` (an Arrow large_string
    column's buffers): equal to `tokens_from_strings` of the decoded keys, without a Python string per key."""

@final
class Ring:
    """An explicit ring, its replicas placed on construction (`RingError` when it is invalid). Node i is in
    datacenter `dcs[i]`, rack `racks[i]` and owns `tokens[i]`; exactly one of `replication_factor`
    (SimpleStrategy) or `replication` ([(dc, RF), ...]: NetworkTopologyStrategy)."""

    def __new__(
        cls,
        dcs: list[str],
        racks: list[str],
        tokens: list[list[int]],
        local_dc: str,
        *,
        replication_factor: int | None = None,
        replication: list[tuple[str, int]] | None = None,
    ) -> Self: ...
    @property
    def ranges(self) -> int: ...
    @property
    def width(self) -> int:
        """Replicas per range, every datacenter."""
    @property
    def local_rf(self) -> int: ...
    def tokens(self) -> bytes:
        """int64 ring tokens, ascending."""
    def owners(self) -> bytes:
        """uint32 node of each token."""
    def replica_table(self) -> bytes:
        """ranges × width uint32 nodes, Cassandra's replica order."""
    def servers(self) -> bytes:
        """uint32 node of each simulated server (the local datacenter's nodes)."""
    def ranges_of(self, tokens: npt.NDArray[np.int64]) -> bytes:
        """uint32 range of each key token."""

@final
class Cluster:
    def __new__(
        cls,
        servers: int,
        slots: int,
        replication: int,
        vnodes: int,
        service_rate: float,
        net_latency_ns: int,
        clients: int,
        *,
        ring: Ring | None = None,
        client_rtt_ns: list[int] | None = None,
        client_key_ns: int = 0,
    ) -> Self:
        """`client_rtt_ns`: the client ↔ coordinator round trip's quantiles, ns, at the equally spaced
        probabilities 0, 1/(n−1), …, 1 (n ≥ 2, non-decreasing): each request's reported latency is the engine's
        less 2 · `net_latency_ns`, plus one draw of it. ParameterError naming `client_rtt_ns` when invalid.
        `client_key_ns`: the per-partition client/coordinator cost, ns: each request's reported latency grows by
        (keys − 1) × it (0: none; at most 1e12, ParameterError naming `client_key_ns` otherwise)."""
    @property
    def groups(self) -> int: ...
    def replica_table(self) -> bytes:
        """groups × RF uint32, primary first."""
    def groups_of(self, tokens: npt.NDArray[np.int64]) -> bytes:
        """uint32 replica group of each token."""

class WorkloadArrays(TypedDict):
    """`Workload.arrays()`: bytes of arrival_ns u64, client u32, req_opsets u32, opset_group u32, opset_req u32,
    opset_ops u32, demand_ns u64, op_input u32, replicas u32 (groups × RF)."""

    arrival_ns: bytes
    client: bytes
    req_opsets: bytes
    opset_group: bytes
    opset_req: bytes
    opset_ops: bytes
    demand_ns: bytes
    op_input: bytes
    replicas: bytes

class LayoutArrays(TypedDict):
    """`WorkloadLayout.arrays()`: bytes of client, req_opsets, opset_group, opset_req, opset_ops, op_input (u32)
    and mean_demand (f32, empty without per-op means)."""

    client: bytes
    req_opsets: bytes
    opset_group: bytes
    opset_req: bytes
    opset_ops: bytes
    op_input: bytes
    mean_demand: bytes

@final
class WorkloadLayout:
    def __new__(
        cls,
        cluster: Cluster,
        offsets: npt.NDArray[np.int64],
        tokens: npt.NDArray[np.int64],
        *,
        mean_demand: npt.NDArray[np.float64] | None = None,
        clients: npt.NDArray[np.uint32] | None = None,
    ) -> Self: ...
    @staticmethod
    def from_arrays(cluster: Cluster, arrays: dict[str, npt.NDArray[Any]]) -> WorkloadLayout:
        """Borrows read-only, C-contiguous arrays named as `arrays()` names them (no copy)."""
    # the counts, declared once in the binding (`pymethods_with_counts!`) for both workload classes
    @property
    def requests(self) -> int:
        """Requests (multigets)."""
    @property
    def opsets(self) -> int:
        """Opsets: a request's ops grouped by replica group."""
    @property
    def ops(self) -> int:
        """Ops: one per key of a request (the tokens given)."""
    @property
    def nbytes(self) -> int: ...
    def arrays(self) -> LayoutArrays: ...

@final
class Workload:
    @staticmethod
    def draw(
        layout: WorkloadLayout,
        *,
        mean_demand: npt.NDArray[np.float64] | None = None,
        timestamps: npt.NDArray[np.float64] | None = None,
        load: float | None = None,
        seed: int = 0,
        demand_dist: str = "exponential",
        demand_sigma: float = 1.0,
    ) -> Workload: ...
    @staticmethod
    def from_arrays(
        layout: WorkloadLayout, arrival: npt.NDArray[np.uint64], demand: npt.NDArray[np.uint64]
    ) -> Workload:
        """Borrows read-only, C-contiguous uint64 arrays (no copy)."""
    def prefix(
        self,
        n: int,
        *,
        mean_demand: npt.NDArray[np.float64] | None = None,
        timestamps: npt.NDArray[np.float64] | None = None,
        load: float | None = None,
        seed: int = 0,
    ) -> Workload: ...
    @property
    def nbytes(self) -> int: ...
    def __new__(
        cls,
        cluster: Cluster,
        offsets: npt.NDArray[np.int64],
        tokens: npt.NDArray[np.int64],
        *,
        mean_demand: npt.NDArray[np.float64] | None = None,
        clients: npt.NDArray[np.uint32] | None = None,
        timestamps: npt.NDArray[np.float64] | None = None,
        load: float | None = None,
        seed: int = 0,
        demand_dist: str = "exponential",
        demand_sigma: float = 1.0,
    ) -> Self: ...
    # the counts, declared once in the binding (`pymethods_with_counts!`) for both workload classes
    @property
    def requests(self) -> int:
        """Requests (multigets)."""
    @property
    def opsets(self) -> int:
        """Opsets: a request's ops grouped by replica group."""
    @property
    def ops(self) -> int:
        """Ops: one per key of a request (the tokens given)."""
    def arrays(self) -> WorkloadArrays: ...

# ---- the replay --------------------------------------------------------------------------------------------
class NativeConfig(Protocol):
    """What `replay` reads (by attribute) of its config; `kvsim.replay` builds one from a `kvsim.ReplayConfig`.
    Flags are uint8 per input op (the order of the workload's tokens)."""

    @property
    def policy(self) -> str: ...
    @property
    def params(self) -> list[tuple[str, float]]: ...
    @property
    def replica(self) -> str: ...
    @property
    def replica_params(self) -> list[tuple[str, float]]: ...
    @property
    def large_est(self) -> npt.NDArray[np.uint8] | None: ...
    @property
    def large_true(self) -> npt.NDArray[np.uint8] | None: ...
    @property
    def server_speeds(self) -> npt.NDArray[np.float64] | None: ...
    @property
    def slowdown(self) -> tuple[int, float, float, int] | None:
        """(interval ns, fraction, factor, duration ns)"""
    @property
    def stalls(self) -> tuple[float, int] | None:
        """(stalls per s per server, stall duration ns)"""
    @property
    def stall_schedule(self) -> list[tuple[int, int, int]] | None:
        """[(server, start ns, end ns)] on the replay's clock: stalls on an explicit schedule (not with `stalls`)"""
    @property
    def writes(self) -> npt.NDArray[np.uint8] | None: ...
    @property
    def closed(self) -> tuple[int, int, str] | None:
        """(threads, mean think time ns, think-time distribution)"""
    @property
    def warmup(self) -> float: ...
    @property
    def record_ops(self) -> bool: ...
    @property
    def size_aware_cost(self) -> bool: ...
    @property
    def seed(self) -> int: ...
    @property
    def stop(self) -> tuple[float, int] | None:
        """(quantile, bound ns): stop once that quantile of the measured latencies is certainly above the bound"""

class RawHeld(TypedDict):
    opsets: int
    max: int
    mean_ms: float
    at_half: int
    at_end: int
    unstable: bool

class RawCounts(TypedDict):
    ops: int

class RawCopies(RawCounts):
    wins: int

class RawWrites(RawCounts):
    copies: int

class RawTimeouts(TypedDict):
    on: bool  # the replay modelled read timeouts (coordinator `drop_expired`)
    requests: int  # requests answered with a timeout
    dropped_reads: int  # reads their replica dropped unserved (expired)

class RawRecords(TypedDict):
    """bytes of request u32, opset u32, server u32, slot u32, enqueue_ns u64, start_ns u64, end_ns u64,
    demand_ns u64."""

    request: bytes
    opset: bytes
    server: bytes
    slot: bytes
    enqueue_ns: bytes
    start_ns: bytes
    end_ns: bytes
    demand_ns: bytes

class _RawResultBase(TypedDict):
    policy: str
    params: list[tuple[str, float]]
    p50_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float
    mean_ms: float
    measured: int
    requests: int
    ops: int
    events: int
    utilization: float
    server_load: bytes  # float64 per server
    server_load_max: float
    half_ratio: float
    steady_state: bool
    sim_wall_s: float
    bytes_per_op: float
    latency_ns: bytes  # uint64 per request
    replica: str
    replica_params: list[tuple[str, float]]
    held: RawHeld
    copies: RawCopies
    writes: RawWrites
    timeouts: RawTimeouts
    served_ops: int
    makespan_ns: int
    capacity_factor: float
    arrival_ns: bytes  # uint64 per request (closed loop), empty in open loop
    stopped: bool  # the stop rule ended the replay (percentiles over the measured requests completed by then)

class RawResult(_RawResultBase, total=False):
    records: RawRecords  # with record_ops

def replay(workload: Workload, config: NativeConfig) -> RawResult:
    """Replays the workload as the config says (GIL released)."""

# ---- catalogue ---------------------------------------------------------------------------------------------
class RawSearch(TypedDict):
    kind: str  # int | float | cat
    low: float | None
    high: float | None
    step: float | None
    log: bool
    choices: list[float] | None

class RawParamSpec(TypedDict):
    name: str
    doc: str
    default: float
    low: float
    high: float
    domain: str  # real | integer | rounded
    valid: str
    search: RawSearch | None

class RawComponentSpec(TypedDict):
    name: str
    fast_loop: bool
    loop_note: str
    params: list[RawParamSpec]

def policy_specs() -> list[RawComponentSpec]: ...
def replica_specs() -> list[RawComponentSpec]: ...
def memcached_policy_specs() -> list[RawComponentSpec]: ...
def policy_names() -> list[str]: ...
def policy_defaults(name: str) -> list[tuple[str, float]]: ...
def coordinator_defaults(name: str) -> list[tuple[str, float]]: ...
def coordinator_spec() -> RawComponentSpec: ...
def replica_names() -> list[str]: ...
def replica_defaults(name: str) -> list[tuple[str, float]]: ...

# ---- models ------------------------------------------------------------------------------------------------
def default_demand_model(service_rate: float) -> tuple[float, float]:
    """(t0_s, bandwidth_bps) of the default size → demand calibration."""

def large_filter(
    tokens: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.float64],
    query: npt.NDArray[np.int64],
    thr_l_bytes: float,
    fp: float = ...,
    parts: int = 1,
) -> tuple[bytes, float, int, int]:
    """(uint8 answers for `query`, measured false-positive rate, bits, hashes) of the large-key filter."""

def capacity_factor(
    servers: int,
    *,
    server_speeds: npt.NDArray[np.float64] | None = None,
    slowdown: tuple[int, float, float, int] | None = None,
    stalls: tuple[float, int] | None = None,
    stall_schedule: list[tuple[int, int, int]] | None = None,  # (server, start ns, end ns)
    span_ns: tuple[int, int] | None = None,  # the schedule's stalled fraction over [from, to); None: [0, last end)
) -> float: ...
def slow_server_speeds(servers: int, n: int, factor: float) -> list[float]: ...

# ---- memcached ---------------------------------------------------------------------------------------------
class RawMemcachedResult(TypedDict):
    policy: str
    requests: int
    mean_us: float
    p50_us: float
    p95_us: float
    p99_us: float
    p999_us: float
    utilization: float
    server_load_max: float
    steady_state: bool
    queries: int
    query_keys: int
    merged_queries: int
    split_requests: int
    chunks: int
    events: int
    client_wait_us: float
    server_wait_us: float
    client_cpu_wait_us: float
    client_cpu_load: float
    span_us: float
    query_threads: int
    sim_wall_s: float
    latencies_us: list[float]

def replay_memcached_raw(
    arrivals_us: list[float],
    keys: list[int],
    server_of: list[int],
    *,
    policy: str,
    servers: int,
    worker_threads: int,
    query_threads: int,
    client_overhead_us: float,
    setup_us: float,
    profile: tuple[float, float, float, float],
    service_cv: float,
    seed: int,
    split_keys: int | None = None,
    split_chunks: int | None = None,
    merge: int = 1,
    elephant_threshold: int = 50,
    shards: tuple[list[int], list[int], list[int]] | None = None,
    client_cpus: int = 0,
    client_processes: int = 1,
    client_key_us: float = 0.0,
) -> RawMemcachedResult: ...
