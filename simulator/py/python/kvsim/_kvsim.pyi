def model_version() -> int: ...

# ---- memcached deployment kind (issue 5, Chisel) -------------------------------------------------------------
from typing import Any

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

# ---- end memcached --------------------------------------------------------------------------------------------
