"""How well `tailtune capture memcached` + `tailtune ingest` recover known multigets from memcached's watch log.

A real memcached (`tests/servers/memcached_server.py`, `-t 4`) is filled with keys of known value sizes; client
processes then send known requests — `get`/`gets` of 1..20 distinct keys (some missing, some with `:` in them, which
memcached URI-encodes), with a `set` of a private key now and then — while `kinds.memcached.capture` watches the
server. The capture is ingested (`memcached-watch`) and compared with what the clients sent, per connection:

* **keys and sizes**: the connection's keys in order, each with its value size (null for a miss), equal what the
  client asked for and what the server held (sets are not requests: their lookups must not appear);
* **grouping**: a request is *exact* when the dataset has it as one request, no more, no less; a *merge* is a
  boundary between two requests the grouping missed, a *split* one it made up.

Modes: `sequential` (one client, each request sent when the previous answer arrived), `concurrent` (four such
clients at once, so four worker threads log at the same time and memcached prints their lines out of order),
`pipelined` (one client sending `--depth` requests per write), `pipelined-concurrent` (two of those). Each capture
is ingested again with other gaps (`--gaps`) to show what the gap trades.

The clients are paced (`--rate` operations per second, all together, open loop): memcached drops watch lines its
logger thread does not drain in time (its worker threads' 64 KiB log buffers fill: `stats` `log_worker_dropped`),
and a capture that lost lines cannot be aligned with what was sent, so it is taken again (`--retakes`). Every take
prints whether its losses are accounted for: the lines memcached logged (known from what was sent) = the lines in
the file + the lines the capture reports lost.

    .venv/bin/python -m validation.memcached_capture --requests 20000

Not a CI test (minutes, depends on the machine); tests/memcached/test_capture.py runs it on tiny inputs.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import socket
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODES: dict[str, tuple[int, bool]] = {  # mode → (clients, pipelined)
    "sequential": (1, False),
    "concurrent": (4, False),
    "pipelined": (1, True),
    "pipelined-concurrent": (2, True),
}
SHARED_KEYS = 2000
MISSING_KEYS = 200  # key names that are never stored
MAX_KEYS = 20

#: One operation a client sent: ("get", keys, sizes) or ("set", key, size).
Op = tuple[Any, ...]


def shared_sizes(seed: int = 7) -> dict[str, int]:
    """The shared keys and their value sizes (1..4000 bytes); every tenth key has a `:` in its name."""
    rng = random.Random(seed)
    return {(f"user:{i}" if i % 10 == 0 else f"k{i}"): rng.randint(1, 4000) for i in range(SHARED_KEYS)}


def populate(host: str, port: int, sizes: dict[str, int]) -> None:
    with socket.create_connection((host, port)) as s:
        for key, n in sizes.items():
            s.sendall(b"set %s 0 0 %d\r\n%s\r\n" % (key.encode(), n, b"v" * n))
            _read_terminators(s, 1, b"")


def _read_terminators(sock: socket.socket, count: int, buf: bytes) -> bytes:
    """Read until `count` replies ended (END, STORED); returns what is left over."""
    seen = 0
    while True:
        while b"\r\n" in buf:
            line, buf = buf.split(b"\r\n", 1)
            if line in (b"END", b"STORED"):
                seen += 1
                if seen == count:
                    return buf
        data = sock.recv(1 << 20)
        if not data:
            raise ConnectionError("memcached closed the connection")
        buf += data


def plan(client: int, requests: int, seed: int, sets_every: int = 10) -> list[Op]:
    """A client's operations: gets of 1..20 distinct keys (shared, missing) and, every `sets_every` operations,
    a set of one of its private keys followed soon by gets that read it."""
    rng = random.Random(seed * 1000 + client)
    names = list(shared_sizes())
    sizes = shared_sizes()
    private: dict[str, int] = {}
    ops: list[Op] = []
    for i in range(requests):
        if sets_every and i % sets_every == sets_every - 1:
            key = f"c{client}:p{rng.randint(0, 9)}"
            private[key] = rng.randint(1, 500)
            ops.append(("set", key, private[key]))
        n = rng.randint(1, MAX_KEYS)
        pool = [*rng.sample(names, n), *(f"miss{rng.randint(0, MISSING_KEYS)}" for _ in range(2)), *private]
        keys = list(dict.fromkeys(rng.sample(pool, min(n, len(pool)))))
        known = {**sizes, **private}
        ops.append(("get", keys, [known.get(k) for k in keys]))
    return ops


def _command(op: Op, rng: random.Random) -> bytes:
    if op[0] == "set":
        return b"set %s 0 0 %d\r\n%s\r\n" % (op[1].encode(), op[2], b"v" * op[2])
    verb = b"gets" if rng.random() < 0.3 else b"get"
    return verb + b" " + " ".join(op[1]).encode() + b"\r\n"


def run_client(
    host: str,
    port: int,
    ops: list[Op],
    *,
    pipelined: bool = False,
    depth: int = 20,
    pause_s: float = 0.0,
    rate: float | None = None,
    start: Any = None,
) -> None:
    """Send `ops` on one connection: one at a time (`pause_s` after each answer), or `depth` per write; with `rate`
    (operations per second) each write waits for its time (open loop: a late one goes at once)."""
    rng = random.Random(len(ops))
    with socket.create_connection((host, port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if start is not None:
            start.wait()
        buf = b""
        step = depth if pipelined else 1
        t0 = time.monotonic()
        for i in range(0, len(ops), step):
            if rate:
                ahead = t0 + i / rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            batch = ops[i : i + step]
            s.sendall(b"".join(_command(op, rng) for op in batch))
            buf = _read_terminators(s, len(batch), buf)
            if pause_s:
                time.sleep(pause_s)


def _client_process(args: tuple[str, int, list[Op], bool, int, float | None, Any]) -> None:
    host, port, ops, pipelined, depth, rate, start = args
    run_client(host, port, ops, pipelined=pipelined, depth=depth, rate=rate, start=start)


@dataclass
class Report:
    """Keys, sizes and grouping of one capture against what its clients sent."""

    mode: str
    gap_us: int
    true_requests: int = 0
    captured_requests: int = 0
    exact: int = 0
    merged: int = 0
    split: int = 0
    keys_exact: bool = True
    sizes_exact: bool = True
    unmatched_clients: int = 0
    lost: int = 0
    lines: int = 0
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def accuracy(self) -> float:
        return self.exact / self.true_requests if self.true_requests else 0.0


def compare(mode: str, gap_us: int, sent: Sequence[list[Op]], table: Any) -> Report:
    """The dataset `table` (a capture's, ingested) against the operations each client sent (see the module doc)."""
    report = Report(mode, gap_us)
    rows = sorted(
        zip(
            table.column("ts").to_pylist(),
            table.column("request_id").to_pylist(),
            range(table.num_rows),
            table.column("client_id").to_pylist(),
            table.column("key").to_pylist(),
            table.column("value_size").to_pylist(),
            strict=True,
        )
    )
    conns: dict[str, list[tuple[int, str, int | None]]] = {}
    for _, rid, _, client, key, size in rows:
        conns.setdefault(client, []).append((rid, key, size))
    report.captured_requests = len({r[1] for r in rows})
    by_keys = {tuple(k for _, k, _ in seq): seq for seq in conns.values()}
    for ops in sent:
        gets = [op for op in ops if op[0] == "get"]
        report.true_requests += len(gets)
        flat = tuple(k for op in gets for k in op[1])
        seq = by_keys.get(flat)
        if seq is None:
            report.unmatched_clients += 1
            report.keys_exact = False
            continue
        if [s for _, _, s in seq] != [s for op in gets for s in op[2]]:
            report.sizes_exact = False
        truth: set[int] = set()
        pos = 0
        for op in gets:
            truth.add(pos)
            pos += len(op[1])
        found = {i for i in range(len(seq)) if i == 0 or seq[i][0] != seq[i - 1][0]}
        report.merged += len(truth - found)
        report.split += len(found - truth)
        pos = 0
        for op in gets:
            a, b = pos, pos + len(op[1])
            pos = b
            if a in found and (b in found or b == len(seq)) and not any(c in found for c in range(a + 1, b)):
                report.exact += 1
    return report


class LiveCapture:
    """`kinds.memcached.capture` on one server in a thread, for as long as the caller's clients run."""

    def __init__(self, host: str, port: int, out: Path, *, gap_us: int = 3) -> None:
        from kinds.memcached.capture import CaptureProgress, CaptureTarget

        self.host, self.port, self.out, self.gap_us = host, port, out, gap_us
        self.target = CaptureTarget(f"{host}:{port}", host, port)
        self.stop_event, self.ready = threading.Event(), threading.Event()
        self.progress: CaptureProgress | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        #: hold(): the capture stops reading (in its progress callback) until release(); `held` says it has.
        self._holding, self.held, self._released = False, threading.Event(), threading.Event()

    def _run(self) -> None:
        from kinds.memcached.capture import capture_memcached

        try:
            self.result = capture_memcached(
                [self.target], self.out, stop=self.stop_event, gap_us=self.gap_us, on_ready=self.ready.set,
                on_progress=self._seen,
            )
        except BaseException as exc:  # handed to the caller by stop()
            self.error = exc
            self.ready.set()

    def _seen(self, p: Any) -> None:
        self.progress = p
        if self._holding:
            self.held.set()
            self._released.wait()

    def hold(self) -> None:
        self._holding = True

    def release(self) -> None:
        self._holding = False
        self._released.set()

    def start(self, timeout_s: float = 30.0) -> LiveCapture:
        self.thread.start()
        if not self.ready.wait(timeout_s) or self.error is not None:
            self.stop()
            raise RuntimeError(f"the capture did not start: {self.error}")
        return self

    def drain(self, timeout_s: float = 120.0) -> None:
        """Wait until memcached's logger handed every line it made to the watcher (sent or skipped) and the capture
        received every line sent: a state, polled, not a delay."""
        deadline = time.monotonic() + timeout_s
        with socket.create_connection((self.host, self.port)) as s:
            while time.monotonic() < deadline:
                st = stats(s)
                written, sent = int(st["log_worker_written"]), int(st["log_watcher_sent"])
                handed = sent + int(st["log_watcher_skipped"])
                got = self.progress.lines if self.progress is not None else 0
                if handed >= written and got >= sent:
                    return
                time.sleep(0.05)
        raise RuntimeError("the capture did not catch up with memcached's logger")

    def stop(self) -> Any:
        self.release()
        self.stop_event.set()
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.result


def stats(sock: socket.socket) -> dict[str, str]:
    sock.sendall(b"stats\r\n")
    buf = b""
    while b"END\r\n" not in buf:
        buf += sock.recv(65536)
    return dict(line.split(" ")[1:3] for line in buf.decode().splitlines() if line.startswith("STAT "))


def capture_run(
    mode: str,
    requests: int,
    *,
    seed: int = 1,
    depth: int = 10,
    threads: int = 4,
    gaps: Sequence[int] = (3,),
    rate: float | None = None,
    retakes: int = 0,
    on_take: Any = None,
) -> list[Report]:
    """One capture of `mode` (MODES) with `requests` per client, ingested once per gap; a report per gap. `rate`:
    the clients' operations per second, all together (None: as fast as they go). A capture that lost lines cannot
    be aligned with what the clients sent: it is taken again, up to `retakes` times (`on_take(report)` sees each
    take; the reports' `extra["lost_before"]` lists the losses of the takes given up)."""
    lost_before: list[int] = []
    while True:
        reports = _take(mode, requests, seed=seed, depth=depth, threads=threads, gaps=gaps, rate=rate)
        if on_take is not None:
            on_take(reports[0])
        if reports[0].lost == 0 or len(lost_before) >= retakes:
            for r in reports:
                r.extra["lost_before"] = lost_before
            return reports
        lost_before.append(reports[0].lost)


def _take(
    mode: str, requests: int, *, seed: int, depth: int, threads: int, gaps: Sequence[int], rate: float | None
) -> list[Report]:
    from base.settings import Settings
    from ingest.pipeline import ingest_file
    from tests.servers.memcached_server import running_memcached

    clients, pipelined = MODES[mode]
    with (
        tempfile.TemporaryDirectory(prefix="tailtune-capture-") as work,
        running_memcached(threads=threads, memory_mb=64) as node,
    ):
        populate(node.host, node.port, shared_sizes())
        sent = [plan(c, requests, seed) for c in range(clients)]
        ctx = mp.get_context("spawn")
        go = ctx.Event()
        procs = [
            ctx.Process(
                target=_client_process,
                args=((node.host, node.port, ops, pipelined, depth, rate / clients if rate else None, go),),
            )
            for ops in sent
        ]
        for p in procs:
            p.start()
        out = Path(work) / f"{mode}.watch"
        live = LiveCapture(node.host, node.port, out).start()
        go.set()
        for p in procs:
            p.join()
            if p.exitcode != 0:
                live.stop()
                raise RuntimeError(f"a client process failed ({p.exitcode})")
        live.drain()
        captured = live.stop()
        settings = Settings(home=Path(work) / "home")
        in_file = sum(line.startswith(b"ts=") for line in out.read_bytes().splitlines())
        logged = sum(len(op[1]) if op[0] == "get" else 2 for ops in sent for op in ops)  # a set: lookup, store
        reports = []
        for gap in gaps:
            info = ingest_file(out, fmt="memcached-watch", watch_gap_us=gap, settings=settings)
            report = compare(mode, gap, sent, info.read_table())
            report.lost, report.lines, report.seconds = captured.lost, captured.lines, captured.seconds
            report.extra = {
                "skipped": captured.skipped, "dropped": captured.dropped, "logged": logged, "in_file": in_file
            }
            reports.append(report)
        return reports


def _table(reports: list[Report]) -> str:
    head = (
        "| mode | gap µs | requests sent | requests in the dataset | exact | merged | split | keys & sizes | lost |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {r.mode} | {r.gap_us} | {r.true_requests:,} | {r.captured_requests:,} | "
        + (
            f"{100 * r.accuracy:.2f}% | {r.merged:,} | {r.split:,} | "
            if r.keys_exact
            else "n/a | n/a | n/a | "  # lines were lost: the connections' keys cannot be aligned with the requests
        )
        + f"{'exact' if r.keys_exact and r.sizes_exact else 'DIFFER'} | {r.lost} |\n"
        for r in reports
    )
    return head + body


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=20000, help="requests per client")
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    ap.add_argument("--gaps", type=int, nargs="+", default=[1, 2, 3, 5, 10, 50])
    ap.add_argument("--depth", type=int, default=10, help="requests per write of a pipelining client")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--rate", type=float, default=2000.0,
        help="operations per second of all clients together (0: as fast as they go); memcached drops watch lines "
        "its logger thread cannot keep up with, and a capture that lost lines cannot be compared line by line",
    )
    ap.add_argument(
        "--retakes", type=int, default=3, help="captures of a mode taken again when the previous one lost lines"
    )
    args = ap.parse_args(argv)
    reports: list[Report] = []
    for mode in args.modes:

        def seen(r: Report, mode: str = mode) -> None:
            x = r.extra
            print(
                f"{mode}: memcached logged {x['logged']:,} lines in {r.seconds:.1f} s; {x['in_file']:,} in the file, "
                f"{r.lost:,} reported lost (skipped {x['skipped']:,}, dropped by its worker threads "
                f"{x['dropped']:,}): "
                f"{'all accounted for' if x['in_file'] + r.lost == x['logged'] else 'NOT ACCOUNTED FOR'}",
                flush=True,
            )

        reports += capture_run(
            mode,
            args.requests,
            seed=args.seed,
            depth=args.depth,
            gaps=args.gaps,
            rate=args.rate or None,
            retakes=args.retakes,
            on_take=seen,
        )
    print(_table(reports))
    print(f"memcached {os.popen('memcached -V').read().strip()}, {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
