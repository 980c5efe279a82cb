"""The one capped reader of a line protocol a peer may abuse (memcached's text protocol: `stats`, `watch`).

Every byte received counts against a byte cap, a line longer than its cap and a reply of more lines than its cap
are refused, and every wait ends at a deadline or when a stop flag is set: a peer that never ends a line or a
reply costs at most the caps and the time budget. The bytes are kept in one `bytearray`; the end of a line is
searched from where the previous search stopped, so a line that arrives in many reads is never scanned or copied
again per read.

`LineReader.take` + `complete` serve a caller that does its own reads (the capture's select loop);
`readline` and `read_until` read a blocking socket themselves.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Final

from base.errors import TailtuneError

__all__ = ["LIMITS", "STATS_CAPS", "LineCaps", "LineReader", "WireLimit", "read_stats"]

#: What `WireLimit.limit` names.
LIMITS: Final = ("bytes", "line", "lines", "deadline", "stopped", "closed")
#: The longest wait of one read before the deadline and the stop flag are looked at again, seconds.
_POLL_S: Final = 0.2
_CHUNK: Final = 64 * 1024


class WireLimit(TailtuneError):
    """The peer sent more than a cap allows, did not answer in time, closed, or the read was stopped; `limit` is
    one of `LIMITS`. `permanent`: the peer's answer itself is at fault (a cap), not the moment."""

    def __init__(self, message: str, *, limit: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.permanent = limit in ("bytes", "line", "lines")


@dataclass(frozen=True)
class LineCaps:
    """The caps of one reader: bytes received in all (0: none), bytes of one line (its end included), lines of
    one `read_until` reply (0: none)."""

    max_bytes: int
    max_line: int
    max_lines: int = 0


class LineReader:
    """Lines from one peer under `caps`; `what` names the peer and the exchange in errors (`memcached H:P: stats`).
    `deadline` is a `time.monotonic()` instant (None: none); `stop` ends any wait when set."""

    def __init__(
        self,
        what: str,
        caps: LineCaps,
        *,
        sock: socket.socket | None = None,
        deadline: float | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.what = what
        self.caps = caps
        self.sock = sock
        self.deadline = deadline
        self.stop = stop
        #: Bytes received in all (what counts against `caps.max_bytes`).
        self.received = 0
        self._buf = bytearray()
        self._scan = 0  # no newline in _buf before this offset

    # --- fed by the caller ------------------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Bytes of an unfinished line held."""
        return len(self._buf)

    def room(self, want: int) -> int:
        """How many bytes the next read may ask for: `want`, less what would pass the byte cap."""
        if not self.caps.max_bytes:
            return want
        return max(0, min(want, self.caps.max_bytes - self.received))

    def take(self, data: bytes) -> None:
        """Count and hold `data`; WireLimit when the byte cap is passed or the unfinished line outgrows its cap."""
        self.received += len(data)
        self._buf += data
        if self.caps.max_bytes and self.received > self.caps.max_bytes:
            raise WireLimit(f"{self.what}: more than {self.caps.max_bytes:,} bytes", limit="bytes")
        self._check_line()

    def complete(self) -> bytes:
        """Every complete line held, as one block ending in a newline (b"" when none); the unfinished rest is
        kept."""
        cut = self._buf.rfind(b"\n", self._scan)
        if cut < 0:
            self._scan = len(self._buf)
            return b""
        block = bytes(self._buf[: cut + 1])
        del self._buf[: cut + 1]
        self._scan = 0
        return block

    def next_line(self) -> bytes | None:
        """The next complete line held, without its `\\r\\n` (None when no line is complete)."""
        end = self._buf.find(b"\n", self._scan)
        if end < 0:
            self._scan = len(self._buf)
            return None
        line = bytes(self._buf[:end]).rstrip(b"\r")
        del self._buf[: end + 1]
        self._scan = 0
        return line

    def drop_partial(self) -> None:
        self._buf.clear()
        self._scan = 0

    def _check_line(self) -> None:
        if len(self._buf) <= self.caps.max_line or self._buf.find(b"\n", self._scan) >= 0:
            return
        self._scan = len(self._buf)
        raise WireLimit(
            f"{self.what}: a line longer than {self.caps.max_line:,} bytes (no end of line in {len(self._buf):,} "
            "bytes)",
            limit="line",
        )

    # --- reading a blocking socket ----------------------------------------------------------------------------
    def check_time(self) -> None:
        """WireLimit when the stop flag is set or the deadline has passed."""
        if self.stop is not None and self.stop.is_set():
            raise WireLimit(f"{self.what}: stopped", limit="stopped")
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise WireLimit(f"{self.what}: no complete answer in time", limit="deadline")

    def fill(self) -> None:
        """One read from `sock` into the buffer, waiting at most until the deadline (looking at the stop flag
        every 0.2 s). WireLimit at the deadline, on stop, at the byte cap or when the peer closed."""
        sock = self.sock
        if sock is None:
            raise ValueError("LineReader.fill needs a socket")
        while True:
            self.check_time()
            wait = _POLL_S if self.deadline is None else max(0.001, min(_POLL_S, self.deadline - time.monotonic()))
            want = self.room(_CHUNK)
            if want == 0:
                raise WireLimit(f"{self.what}: more than {self.caps.max_bytes:,} bytes", limit="bytes")
            sock.settimeout(wait)
            try:
                data = sock.recv(want)
            except (TimeoutError, BlockingIOError, InterruptedError):
                continue
            if not data:
                raise WireLimit(f"{self.what}: the server closed the connection", limit="closed")
            self.take(data)
            return

    def readline(self) -> bytes:
        """The next line (without `\\r\\n`), reading as needed."""
        while True:
            line = self.next_line()
            if line is not None:
                return line
            self.fill()

    def read_until(self, end: bytes) -> list[bytes]:
        """The lines before the line `end` (e.g. b"END"), reading as needed; at most `caps.max_lines`."""
        lines: list[bytes] = []
        while True:
            line = self.readline()
            if line == end:
                return lines
            lines.append(line)
            if self.caps.max_lines and len(lines) > self.caps.max_lines:
                raise WireLimit(f"{self.what}: more than {self.caps.max_lines:,} lines", limit="lines")


#: The caps of one `stats` reply when the caller names none (the settings' defaults).
STATS_CAPS: Final = LineCaps(max_bytes=1024**2, max_line=64 * 1024, max_lines=10_000)


def read_stats(
    sock: socket.socket, label: str, *, timeout_s: float, caps: LineCaps = STATS_CAPS, what: str = "stats",
    stop: threading.Event | None = None,
) -> dict[str, str]:
    """Send `stats` (or `stats settings`: `what`) on `sock` and read the `STAT name value` lines up to `END`,
    within `caps` and `timeout_s` for the whole reply. WireLimit (naming `memcached LABEL: what`) otherwise."""
    sock.sendall(what.encode() + b"\r\n")
    reader = LineReader(f"memcached {label}: {what}", caps, sock=sock, deadline=time.monotonic() + timeout_s,
                        stop=stop)
    out: dict[str, str] = {}
    for line in reader.read_until(b"END"):
        parts = line.decode("ascii", errors="replace").split(" ", 2)
        if len(parts) == 3 and parts[0] == "STAT":
            out[parts[1]] = parts[2]
        elif parts[0] in ("ERROR", "CLIENT_ERROR", "SERVER_ERROR"):
            raise WireLimit(f"memcached {label}: {what}: {line[:200]!r}", limit="closed")
    return out
