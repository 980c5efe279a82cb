def model_version() -> int: ...

# ---- memcached deployment kind (issue 5, Chisel) ----------------------------------------------------------
from typing import Any  # noqa: E402

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
) -> dict[str, Any]: ...

# ---- end memcached ----------------------------------------------------------------------------------------

# ---- replay core (issue 3) --------------------------------------------------------------------------------
class KvsimError(ValueError): ...
class ParameterError(KvsimError): ...
class WorkloadError(KvsimError): ...

def tokens_from_ids(ids: Any) -> bytes: ...
def tokens_from_strings(keys: list[str]) -> bytes: ...
def policy_names() -> list[str]: ...
def policy_defaults(name: str) -> list[tuple[str, float]]: ...

class Cluster:
    def __init__(
        self,
        servers: int,
        slots: int,
        replication: int,
        vnodes: int,
        service_rate: float,
        net_latency_ns: int,
        clients: int,
    ) -> None: ...
    @property
    def groups(self) -> int: ...
    def replica_table(self) -> bytes: ...
    def groups_of(self, tokens: Any) -> bytes: ...

class Workload:
    def __init__(
        self,
        cluster: Cluster,
        offsets: Any,
        tokens: Any,
        *,
        mean_demand: Any | None = None,
        clients: Any | None = None,
        timestamps: Any | None = None,
        load: float | None = None,
        seed: int = 0,
        demand_dist: str = "exponential",
        demand_sigma: float = 1.0,
    ) -> None: ...
    @property
    def requests(self) -> int: ...
    @property
    def opsets(self) -> int: ...
    @property
    def ops(self) -> int: ...
    def arrays(self) -> dict[str, bytes]: ...
    def replay(
        self,
        policy: str,
        params: list[tuple[str, float]],
        *,
        warmup: float = 0.1,
        record_ops: bool = False,
        size_aware_cost: bool = False,
    ) -> dict[str, Any]: ...

# ---- end replay core --------------------------------------------------------------------------------------

# ---- replica selection, sizes (issue 4) -------------------------------------------------------------------
def replica_names() -> list[str]: ...
def replica_defaults(name: str) -> list[tuple[str, float]]: ...
def default_demand_model(service_rate: float) -> tuple[float, float]: ...
def large_filter(
    tokens: Any, sizes: Any, query: Any, thr_l_bytes: float, fp: float = ..., parts: int = 1
) -> tuple[bytes, float, int, int]: ...
def replay_ext(
    workload: Workload,
    policy: str,
    params: list[tuple[str, float]],
    *,
    replica: str = "round-robin",
    replica_params: list[tuple[str, float]] = ...,
    warmup: float = 0.1,
    record_ops: bool = False,
    size_aware_cost: bool = False,
    large_est: Any | None = None,
    large_true: Any | None = None,
    seed: int = 0,
    server_speeds: Any | None = None,
    slowdown_interval_ns: int = 0,
    slowdown_fraction: float = 0.0,
    slowdown_factor: float = 1.0,
    slowdown_duration_ns: int = 0,
    write: Any | None = None,
    closed_threads: int = 0,
    think_ns: int = 0,
    think_dist: str = "exponential",
) -> dict[str, Any]: ...
def capacity_factor(
    servers: int,
    *,
    server_speeds: Any | None = None,
    slowdown_interval_ns: int = 0,
    slowdown_fraction: float = 0.0,
    slowdown_factor: float = 1.0,
    slowdown_duration_ns: int = 0,
) -> float: ...
def slow_server_speeds(servers: int, n: int, factor: float) -> list[float]: ...

# ---- end replica selection --------------------------------------------------------------------------------
