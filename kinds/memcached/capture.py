"""Capture: record what memcached's `watch fetchers mutations` shows for a while, as a `memcached-watch` trace file.

One connection per server issues the watch (memcached then streams one line per key it looks up and per store);
every line is written as it arrives (with `server=<host:port> ` in front when several servers are captured into one
file), bytes only: a thread of its own reads the file behind the writer and counts it with the grouping the ingest
applies (`ingest.mcwatch`), so the capture says how many requests the trace will hold without its parsing ever
delaying the reads (memcached drops lines for a watcher that reads too slowly). A second connection per server
reads `stats` before and after.

What the watch loses is counted, never hidden:

* memcached's own `skipped=N` lines (the watcher's buffer was full: N lines lost) stay in the file;
* lines memcached's worker threads dropped before any watcher saw them (their log buffers were full) appear nowhere
  in the stream: the growth of `stats` `log_worker_dropped` during the capture is written as a `dropped=N` line
  (a server-wide counter: it includes drops of line types another watcher asked for);
* skips memcached had not reported yet when the capture ended (it reports them before the next line it sends) are
  the growth of `stats` `log_watcher_skipped` beyond the `skipped=` lines seen, written as one more `skipped=N`
  line — only when this capture is the server's only watcher (the counter is server-wide).

The capture stops after `duration_s`, when `stop` is set (Ctrl-C in the CLI, a cancel in the worker), when the
bytes received from the servers reach `max_bytes` (an unfinished line's included), or when every server closed its
watch; in each case it keeps what it wrote: the file is written next to `out` under a hidden name and renamed into
place when the capture ends. It fails (and leaves nothing) when it could not start (a server that cannot be
reached or refuses the watch), when a server sends a line longer than `max_line` (`CaptureLineTooLong`: no
memcached does), and when the disk is full (`CaptureDiskFull`: the path and the bytes free).

Every read goes through one capped reader (`base.linereader`): the watch streams' and the `stats`
replies' (bytes, lines, and a deadline: `timeout_s` for a reply, and the rest of a line the stop cut in two is
awaited at most `_FINISH_S`), so a server that never ends a line or a reply holds neither the memory nor the time
of the capture.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, Final

from base.errors import BadInputError
from base.linereader import STATS_CAPS, LineCaps, LineReader, WireLimit, read_stats
from base.settings import Settings
from control.egress import Egress, EgressRefused, parse_server
from control.kind import CaptureDiskFull, CaptureFailed
from control.storage import DISK_FULL_ERRNOS
from ingest.mcwatch import SKIPPED, WATCH_COMMAND, Grouper, LineProblem, parse_line

__all__ = [
    "STATS_CAPS",
    "CaptureDiskFull",
    "CaptureFailed",
    "CaptureLineTooLong",
    "CaptureProgress",
    "CaptureResult",
    "CaptureTarget",
    "capture_memcached",
    "parse_server",
    "read_stats",
    "stats_caps",
]

_RECV: Final = 1 << 20
#: How often the progress callback is called at most, seconds.
_PROGRESS_EVERY_S: Final = 0.2
_POLL_S: Final = 0.2
#: The longest wait for the rest of a line the stop cut in two, seconds (it is on its way, or it is not coming).
_FINISH_S: Final = 1.0
#: The longest line of a watch stream when the caller names none (`TAILTUNE_CAPTURE_MAX_LINE_BYTES`'s default).
_MAX_LINE: Final = 64 * 1024


class CaptureLineTooLong(CaptureFailed):
    """A server sent a watch line longer than the cap (`TAILTUNE_CAPTURE_MAX_LINE_BYTES`): the capture ends and
    keeps nothing."""

    def __init__(self, message: str) -> None:
        super().__init__(message, permanent=True,
                         hint="no memcached sends such lines: check connection.servers names memcached servers")


@dataclass(frozen=True)
class CaptureTarget:
    """One server: its label (`host:port` as given; the `server=` of its lines) and the address to connect to."""

    label: str
    host: str
    port: int


@dataclass(frozen=True)
class CaptureProgress:
    elapsed_s: float
    lines: int
    requests: int
    lost: int
    bytes: int


@dataclass
class CaptureResult:
    """What a capture wrote and saw. `requests`: as the ingest will group them (with `gap_us`); `lost`: lines the
    watch lost (`skipped` by memcached's watcher, `dropped` by its worker threads); `closed`: servers that ended
    the watch before the capture did."""

    out: str
    servers: list[str]
    started_at: str
    seconds: float
    stopped: str  # duration | interrupted | size cap | servers closed
    lines: int = 0
    fetches: int = 0
    stores: int = 0
    requests: int = 0
    skipped: int = 0
    dropped: int = 0
    unreadable: int = 0
    bytes: int = 0
    gap_us: int = 0
    closed: list[str] = field(default_factory=list)

    @property
    def lost(self) -> int:
        return self.skipped + self.dropped

    @property
    def complete(self) -> bool:
        """Nothing lost and every server watched to the end."""
        return self.lost == 0 and not self.closed and self.stopped != "size cap"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "lost": self.lost, "complete": self.complete}


class _Server:
    """One server's two connections: the watch, and one for `stats`."""

    def __init__(self, target: CaptureTarget, several: bool) -> None:
        self.target = target
        #: The `server=` of its lines ("" when it is the only server: its lines have none).
        self.tag = target.label if several else ""
        self.prefix = f"server={target.label} ".encode() if several else b""
        self.watch: socket.socket | None = None
        self.stats: socket.socket | None = None
        #: The watch stream's reader (its unfinished line, the bytes received), once the watch is on.
        self.reader: LineReader | None = None
        self.before: dict[str, str] = {}
        self.skipped_seen = 0
        self.closed = False

    def close(self) -> None:
        for sock in (self.watch, self.stats):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()
        self.watch = self.stats = None


def _connect(target: CaptureTarget, timeout_s: float) -> socket.socket:
    try:
        sock = Egress().connect(target.host, target.port, timeout_s)  # a name is resolved once, here
    except (OSError, EgressRefused) as exc:
        raise CaptureFailed(f"memcached {target.label}: cannot connect: {exc}", permanent=False) from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def stats_caps(settings: Settings) -> LineCaps:
    """The caps of one `stats` reply (`TAILTUNE_MEMCACHED_STATS_MAX_BYTES`, `..._MAX_LINES`; lines at most
    `TAILTUNE_CAPTURE_MAX_LINE_BYTES`)."""
    return LineCaps(max_bytes=settings.memcached_stats_max_bytes, max_line=settings.capture_max_line_bytes,
                    max_lines=settings.memcached_stats_max_lines)


def _stats(server: _Server, timeout_s: float, caps: LineCaps) -> dict[str, str]:
    assert server.stats is not None
    try:
        return read_stats(server.stats, server.target.label, timeout_s=timeout_s, caps=caps)
    except OSError as exc:
        raise CaptureFailed(f"memcached {server.target.label}: stats: {exc}", permanent=False) from None
    except WireLimit as exc:
        raise CaptureFailed(str(exc), permanent=exc.permanent) from None


def _counter(stats: dict[str, str], name: str) -> int:
    value = stats.get(name, "0")
    return int(value) if value.isdigit() and len(value) <= 20 else 0


def _start_watch(server: _Server, timeout_s: float, caps: LineCaps, stop: threading.Event) -> None:
    """Issue the watch and read its `OK`; what followed it in the same reads stays in the server's reader."""
    label = server.target.label
    sock = _connect(server.target, timeout_s)
    server.watch = sock
    reader = LineReader(f"memcached {label}: watch", caps, sock=sock, deadline=time.monotonic() + timeout_s,
                        stop=stop)
    try:
        sock.sendall(WATCH_COMMAND)
        answer = reader.readline().decode("ascii", errors="replace")
    except OSError as exc:
        raise CaptureFailed(f"memcached {label}: watch: {exc}", permanent=False) from None
    except WireLimit as exc:
        raise CaptureFailed(str(exc), permanent=exc.permanent) from None
    if answer != "OK":
        hint = None
        if "not allowed" in answer:
            hint = "memcached was started with `-o no_watch`: restart it without that option to capture"
        raise CaptureFailed(
            f"memcached {label} refused `{WATCH_COMMAND.decode().strip()}`: {answer[:200]!r}",
            permanent=True,
            hint=hint,
        )
    sock.setblocking(False)
    reader.deadline = None  # the capture's loop keeps the time from here
    server.reader = reader


def capture_memcached(
    targets: Sequence[CaptureTarget],
    out: Path,
    *,
    duration_s: float | None = None,
    stop: threading.Event | None = None,
    timeout_s: float = 10.0,
    max_bytes: int = 0,
    max_line: int = _MAX_LINE,
    stats_caps: LineCaps = STATS_CAPS,
    gap_us: int = 3,
    on_ready: Callable[[], None] | None = None,
    on_progress: Callable[[CaptureProgress], None] | None = None,
) -> CaptureResult:
    """Capture the servers' watch into `out` until `duration_s` passed, `stop` is set, `max_bytes` were received
    (0: no cap) or every server closed its watch (see the module doc); a line longer than `max_line` fails it
    (`CaptureLineTooLong`). `on_ready` is called once every watch is on; `on_progress` about every 0.2 s."""
    if not targets:
        raise BadInputError.single("command line", "no server to capture", field="server")
    if duration_s is not None and not duration_s > 0:
        raise BadInputError.single("command line", f"--duration must be > 0, got {duration_s}", field="duration")
    stop = stop or threading.Event()
    out = Path(out)
    several = len(targets) > 1
    servers = [_Server(t, several) for t in targets]
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    result = CaptureResult(str(out), [t.label for t in targets], started_at, 0.0, "duration", gap_us=gap_us)
    watch_caps = LineCaps(max_bytes=0, max_line=max_line)
    sel = selectors.DefaultSelector()
    tally: _Tally | None = None
    try:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            fh: BinaryIO = tmp.open("wb")
        except OSError as exc:
            if exc.errno in DISK_FULL_ERRNOS:
                raise CaptureDiskFull(out, exc) from None
            raise BadInputError.single(str(out), f"cannot write the capture: {exc}", field="out") from None
        with fh:
            writer = _Writer(fh, out)
            writer.comment(f"tailtune capture memcached {' '.join(result.servers)} started {started_at}")
            for i, server in enumerate(servers):
                server.stats = _connect(server.target, timeout_s)
                server.before = _stats(server, timeout_s, stats_caps)
                _start_watch(server, timeout_s, watch_caps, stop)
                assert server.watch is not None
                sel.register(server.watch, selectors.EVENT_READ, i)
            tally = _Tally(tmp, gap_us)
            tally.start()
            writer.tally = tally
            if on_ready is not None:
                on_ready()
            t0 = time.monotonic()
            for server in servers:
                writer.feed(server, b"")
            last_progress = 0.0
            while True:
                elapsed = time.monotonic() - t0
                if stop.is_set():
                    result.stopped = "interrupted"
                    break
                if duration_s is not None and elapsed >= duration_s:
                    break
                left = max_bytes - sum(sv.reader.received for sv in servers if sv.reader is not None)
                if max_bytes and (left <= 0 or writer.bytes >= max_bytes):
                    result.stopped = "size cap"
                    break
                if not sel.get_map():
                    result.stopped = "servers closed"
                    break
                wait = _POLL_S if duration_s is None else max(0.0, min(_POLL_S, duration_s - elapsed))
                for key, _ in sel.select(wait):
                    server = servers[key.data]
                    assert server.watch is not None
                    try:
                        data = server.watch.recv(min(_RECV, left) if max_bytes else _RECV)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        data = b""
                    if not data:
                        sel.unregister(server.watch)
                        server.closed = True
                        result.closed.append(server.target.label)
                        continue
                    writer.feed(server, data)
                    if max_bytes:
                        left -= len(data)
                        if left <= 0:
                            break
                if on_progress is not None and elapsed - last_progress >= _PROGRESS_EVERY_S:
                    last_progress = elapsed
                    on_progress(tally.progress(elapsed, writer))
            result.seconds = round(time.monotonic() - t0, 3)
            for server in servers:
                left = max_bytes - sum(sv.reader.received for sv in servers if sv.reader is not None)
                _finish_line(server, writer, stop if result.stopped != "interrupted" else None,
                             max(0, left) if max_bytes else None)
            tally.wait_caught_up()  # the trailer needs every `skipped=` line counted
            for server in servers:
                for raw in _trailer(server, tally.skipped[server.tag], timeout_s, stats_caps):
                    writer.feed(server, raw)
            tally.wait_caught_up()
            writer.comment(
                f"tailtune capture ended ({result.stopped}) after {result.seconds} s: {writer.lines} lines, "
                f"{tally.grouper.lost} lost"
            )
            tally.finish()
        tally.fill(result)
        result.bytes = tmp.stat().st_size
        os.replace(tmp, out)
        if on_progress is not None:
            on_progress(tally.progress(result.seconds, writer))
    except BaseException:
        if tally is not None:
            tally.finish()
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    finally:
        sel.close()
        for server in servers:
            server.close()
    return result


def _finish_line(server: _Server, writer: _Writer, stop: threading.Event | None, budget: int | None) -> None:
    """A line the stop cut in two: its rest is read (it is on its way) for at most `_FINISH_S`, within the line
    cap and the `budget` of bytes the byte cap leaves (None: none), so the file holds no cut line; what does not
    come in time or within the caps is not written."""
    reader = server.reader
    if reader is None or not reader.pending:
        return
    if server.closed or server.watch is None:
        reader.drop_partial()
        return
    reader.sock, reader.deadline, reader.stop = server.watch, time.monotonic() + _FINISH_S, stop
    if budget is not None:
        reader.caps = LineCaps(max_bytes=reader.received + budget, max_line=reader.caps.max_line)
    try:
        while reader.pending:
            reader.fill()
            writer.feed(server, b"")
    except (OSError, WireLimit) as exc:
        if isinstance(exc, WireLimit) and exc.limit == "line":
            raise CaptureLineTooLong(str(exc)) from None
        reader.drop_partial()  # gone, or not in time: the cut line is not written


def _trailer(server: _Server, skipped_seen: int, timeout_s: float, caps: LineCaps) -> list[bytes]:
    """After the stream: what memcached lost that the stream did not say (see the module doc)."""
    if server.stats is None:
        return []
    try:
        after = _stats(server, timeout_s, caps)
    except CaptureFailed:
        return []  # the server went away: its losses after that cannot be known (it is in `closed`)
    extra: list[bytes] = []
    dropped = _counter(after, "log_worker_dropped") - _counter(server.before, "log_worker_dropped")
    if dropped > 0:
        extra.append(b"dropped=%d\n" % dropped)
    if not server.closed and _counter(after, "log_watchers") == 1:
        skipped = _counter(after, "log_watcher_skipped") - _counter(server.before, "log_watcher_skipped")
        if skipped > skipped_seen:
            extra.append(b"skipped=%d\n" % (skipped - skipped_seen))
    return extra


class _Writer:
    """Writes the watch streams' lines as they arrive: the capture's hot path, bytes only (no parsing). Each
    server's reader holds its unfinished line (no copy of it per read)."""

    def __init__(self, fh: BinaryIO, out: Path) -> None:
        self.fh = fh
        self.out = out
        self.bytes = 0
        self.lines = 0
        self.tally: _Tally | None = None

    def comment(self, text: str) -> None:
        self._write(f"# {text}\n".encode())

    def feed(self, server: _Server, data: bytes) -> None:
        """`data` from `server`'s watch (or of its trailer): its complete lines are written."""
        reader = server.reader
        if reader is None:  # no stream (cannot happen once the watch is on): the trailer's own lines
            block = data
        else:
            try:
                if data:
                    reader.take(data)
            except WireLimit as exc:
                raise CaptureLineTooLong(str(exc)) from None
            block = reader.complete()
        if not block:
            return
        if server.prefix:
            block = b"".join(server.prefix + ln + b"\n" for ln in block[:-1].split(b"\n"))
        self.lines += block.count(b"\n")
        self._write(block)

    def _write(self, block: bytes) -> None:
        try:
            self.fh.write(block)
            self.fh.flush()  # on disk as it comes (under the hidden name until the capture ends), for the tally too
        except OSError as exc:
            if exc.errno in DISK_FULL_ERRNOS:
                with contextlib.suppress(OSError):  # its buffer cannot be written either
                    self.fh.close()
                raise CaptureDiskFull(self.out, exc) from None
            raise
        self.bytes += len(block)
        if self.tally is not None:
            self.tally.wrote(self.bytes)


class _Tally(threading.Thread):
    """Reads the capture file behind the writer and counts it as the ingest will (`ingest.mcwatch`), in its own
    thread: parsing never delays the reads from memcached (whose buffers overflow when the reader falls behind).
    Memory: the grouper's open requests; a tally behind the writer only catches up later (at the latest at the
    end, before the summary)."""

    def __init__(self, path: Path, gap_us: int) -> None:
        super().__init__(daemon=True, name="capture-tally")
        self.path = path
        self.grouper = Grouper(gap_us)
        self.requests = 0  # closed so far
        self.unreadable = 0
        self.lines = 0
        self.skipped: Counter[str] = Counter()  # per server label ("" for one server)
        self.error: BaseException | None = None
        self._cond = threading.Condition()
        self._written = 0
        self._read = 0
        self._done = False

    def wrote(self, offset: int) -> None:
        with self._cond:
            self._written = offset
            self._cond.notify_all()

    def wait_caught_up(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._read >= self._written or self.error is not None or not self.is_alive())
        if self.error is not None:
            raise self.error

    def finish(self) -> None:
        with self._cond:
            self._done = True
            self._cond.notify_all()
        if self.is_alive():
            self.join()

    def run(self) -> None:
        try:
            with self.path.open("rb") as fh:
                partial = b""
                number = 0
                while True:
                    with self._cond:
                        self._cond.wait_for(lambda: self._read < self._written or self._done)
                        if self._read >= self._written:
                            return
                        want = min(self._written - self._read, _RECV)
                    data = fh.read(want)
                    buf = partial + data
                    cut = buf.rfind(b"\n")
                    partial = buf[cut + 1 :]
                    for raw in buf[: cut + 1].split(b"\n")[:-1] if cut >= 0 else ():
                        number += 1
                        self._line(raw, number)
                    with self._cond:
                        self._read += len(data)
                        self._cond.notify_all()
        except BaseException as exc:  # handed to the capture (wait_caught_up), which fails with it
            self.error = exc
            with self._cond:
                self._cond.notify_all()

    def _line(self, raw: bytes, number: int) -> None:
        try:
            line = parse_line(raw)
        except LineProblem:
            self.unreadable += 1
            return
        if line.kind:  # not OK / blank / comment
            self.lines += 1
        if line.kind == SKIPPED:
            self.skipped[line.server] += line.count
        self.requests += len(self.grouper.add(line, number))

    def progress(self, elapsed: float, writer: _Writer) -> CaptureProgress:
        g = self.grouper
        return CaptureProgress(round(elapsed, 3), writer.lines, self.requests + g.open_requests, g.lost, writer.bytes)

    def fill(self, result: CaptureResult) -> None:
        if self.error is not None:
            raise self.error
        self.requests += len(self.grouper.finish())
        g = self.grouper
        result.lines, result.unreadable, result.requests = self.lines, self.unreadable, self.requests
        result.fetches, result.stores = g.fetches - g.lookups, g.stores
        result.skipped, result.dropped = g.skipped, g.dropped
