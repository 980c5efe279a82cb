"""The hand-worked `tailtune simulate` case several CLI tests share: 1 ms deterministic reads on one slot per
server, 50 µs one way, the trace's own times, nothing cut as warm-up, and a trace of two one-key requests 10 ms
apart (no queueing), the first at t = 1000 s (the replay's clock starts there)."""

from __future__ import annotations

from pathlib import Path


def simulate_args(servers: int) -> tuple[str, ...]:
    """`simulate` with fifo on `servers` servers, RF `servers` (every key on each), one slot each."""
    return ("simulate", "--policy", "fifo", "--servers", str(servers), "--replication", str(servers), "--slots", "1",
            "--clients", "1", "--service-rate", "1000", "--demand-dist", "deterministic", "--net-latency-us", "50",
            "--use-timestamps", "--trace-rate", "--warmup", "0", "--json")


def two_requests(tmp_path: Path) -> Path:
    """The two-request trace, written under `tmp_path`."""
    p = tmp_path / "trace.csv"
    p.write_text("request_id,ts,key\n0,1000.000,a\n1,1000.010,b\n")
    return p
