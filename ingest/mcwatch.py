"""memcached's watch log (`watch fetchers mutations`, memcached 1.6): the line grammar, and the heuristic that groups
the fetches of one multi-key `get`/`gets` into one request. Light on purpose (no Arrow): the reader
(`ingest.formats.memcached_watch`) and the live capture (`kinds.memcached.capture`) share it, so a capture counts
its requests exactly as the ingest will group them.

The lines, as memcached 1.6.18 prints them (`logger.c`):

    ts=<sec>.<usec> gid=<n> type=item_get key=<k> status=found|not_found|flushed|expired clsid=<c> cfd=<fd> size=<n>
    ts=<sec>.<usec> gid=<n> type=item_store key=<k> status=<s> cmd=<c> ttl=<t> clsid=<c> cfd=<fd> size=<n>
    skipped=<n>

`usec` is printed without zero padding (`ts=1700000000.5042` is 5042 µs past the second); keys are URI-encoded
(`%NN` for every byte but ASCII letters, digits and `-._~`); `size` is the value's bytes (0 for a miss; memcached
logs it from 1.6.11, `cfd` from 1.5.17: a line without `cfd` is a problem, one without `size` has no size);
`skipped=<n>` says the watcher's buffer was full and `n` lines were lost before the next one. tailtune's capture
adds `dropped=<n>` (lines memcached's worker threads dropped before any watcher saw them) and, when it captures
several servers into one file, a leading `server=<host:port> ` on every line. `OK` (memcached's reply to `watch`),
blank lines and `#` comments are skipped; lines of other types (evictions, connection events) are counted and
skipped.

The grouping (docs/formats.md § memcached-watch): memcached logs one `item_get` per key while it serves a
`get`/`gets`, back to back on the worker thread of that connection (`cfd`), but nothing marks where a command
starts. So, per connection (per server and `cfd`), a fetch joins the open request when it was logged at most
`gap_us` µs after the connection's previous fetch and its key is not in the request yet; anything else opens a new
request. A store (`item_store`) closes the connection's open request and removes the lookup its command logged
just before it (`set`, `add`, `replace`, `append`, `prepend` and `cas` look their key up first; a store that
failed for size or memory looks it up just after). It is a heuristic: a command of a pipelining client that follows
within `gap_us` joins the previous one, a stall of the server thread inside one command splits it, and `delete`,
`touch`, `incr` and `decr` log the same lookup as a one-key `get`. validation/RESULTS.md measures it.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import unquote_to_bytes

__all__ = [
    "DEFAULT_GAP_US",
    "WATCH_COMMAND",
    "Fetch",
    "Grouper",
    "LineProblem",
    "Request",
    "WatchLine",
    "parse_line",
]

#: What the capture sends: fetches (one line per key looked up) and mutations (stores).
WATCH_COMMAND: Final = b"watch fetchers mutations\r\n"
#: The grouping's gap when nothing else is said (the setting `TAILTUNE_MEMCACHED_WATCH_GAP_US` has the same default).
DEFAULT_GAP_US: Final = 3

#: Line kinds.
NOTHING: Final = 0  # OK, blank, comment
FETCH: Final = 1  # type=item_get
STORE: Final = 2  # type=item_store
OTHER: Final = 3  # another type (eviction, conn_new, ...)
SKIPPED: Final = 4  # skipped=N (memcached)
DROPPED: Final = 5  # dropped=N (tailtune's capture)

#: Stores that failed before their key was looked up; memcached looks it up right after (to unlink a stale value).
_FAILED_ALLOC: Final = frozenset(["too_large", "no_memory"])
_MAX_DIGITS: Final = 18  # any count or id of up to 18 digits fits an int64


class LineProblem(Exception):
    """What is wrong with one line: the field it concerns (None: the line's shape) and the problem."""

    def __init__(self, field: str | None, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem


@dataclass(frozen=True, slots=True)
class WatchLine:
    """One parsed line. `us`: its ts in microseconds; `size`: -1 when the line has none (memcached before 1.6.11);
    `count`: of a `skipped=` or `dropped=` line."""

    kind: int
    server: str = ""
    us: int = 0
    gid: int = 0
    type: str = ""
    key: str = ""
    status: str = ""
    cfd: int = 0
    size: int = 0
    count: int = 0


_NOTHING_LINE: Final = WatchLine(NOTHING)


def _show(text: str) -> str:
    return '"' + (text if len(text) <= 60 else text[:57] + "...") + '"'


def _digits(value: str | None, name: str, *, signed: bool = False) -> int:
    if value is None:
        raise LineProblem(name, "missing")
    body = value[1:] if signed and value.startswith("-") else value
    if not (body.isascii() and body.isdigit() and len(body) <= _MAX_DIGITS):
        kind = "an integer" if signed else "a non-negative integer"
        raise LineProblem(name, f"expected {kind}, got {_show(value)}")
    return int(value)


def _ts_us(value: str) -> int:
    """`<sec>.<usec>` (usec unpadded, 0..999999) → microseconds."""
    sec, dot, usec = value.partition(".")
    if (
        not dot
        or not (sec.isascii() and sec.isdigit() and len(sec) <= 12)
        or not (usec.isascii() and usec.isdigit() and len(usec) <= 6)
    ):
        raise LineProblem("ts", f"expected <seconds>.<microseconds> (memcached's ts=%d.%d), got {_show(value)}")
    return int(sec) * 1_000_000 + int(usec)


def _key(value: str | None) -> str:
    if not value:
        raise LineProblem("key", "missing value")
    if "%" not in value:
        return value
    raw = unquote_to_bytes(value)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return value  # a key that is not UTF-8 stays as memcached printed it (URI-encoded)


#: The lines that matter, exactly as memcached 1.6 prints them: read without splitting them into fields. Anything
#: else (another type, an older memcached, a problem) goes the long way, which names what is wrong.
_FAST: Final = re.compile(
    rb"(?:server=([\x21-\x7e]+) )?ts=(\d{1,12})\.(\d{1,6}) gid=(\d{1,18}) type=(item_get|item_store)"
    rb" key=([\x21-\x24\x26-\x7e]+)"
    rb" status=([a-z_]+) (?:cmd=[a-z]+ ttl=\d+ )?clsid=\d+ cfd=(-?\d{1,18}) size=(\d{1,18})\r?\n?"
)
_KINDS: Final = {b"item_get": 1, b"item_store": 2}


def parse_line(raw: bytes) -> WatchLine:
    """One line of a watch log (with or without its line break); raises LineProblem naming the field."""
    m = _FAST.fullmatch(raw)
    if m is not None:
        server, sec, usec, gid, kind, key, status, cfd, size = m.groups()
        return WatchLine(
            _KINDS[kind],
            server.decode() if server else "",
            int(sec) * 1_000_000 + int(usec),
            int(gid),
            kind.decode(),
            key.decode(),
            status.decode(),
            int(cfd),
            int(size),
        )
    return _parse_slowly(raw)


def _parse_slowly(raw: bytes) -> WatchLine:
    text = raw.rstrip(b"\r\n")
    if not text.strip() or text.startswith(b"#") or text == b"OK":
        return _NOTHING_LINE
    try:
        line = text.decode("ascii")
    except UnicodeDecodeError as exc:
        raise LineProblem(
            None, f"byte 0x{text[exc.start]:02x} at offset {exc.start}: watch lines are ASCII (keys are URI-encoded)"
        ) from None
    parts = line.split(" ")
    server = ""
    if parts[0].startswith("server="):
        server = parts[0][len("server=") :]
        if not server:
            raise LineProblem("server", "missing value")
        parts = parts[1:]
    first = parts[0] if parts else ""
    name, sep, value = first.partition("=")
    if name in ("skipped", "dropped") and sep:
        if len(parts) > 1:
            raise LineProblem(None, f"unexpected text after {name}=: {_show(' '.join(parts[1:]))}")
        return WatchLine(SKIPPED if name == "skipped" else DROPPED, server, count=_digits(value, name))
    if name != "ts" or not sep:
        raise LineProblem(
            None,
            f"not a memcached watch line (expected ts=… gid=… type=…, skipped=N or dropped=N), got {_show(line)}",
        )
    fields: dict[str, str] = {}
    for part in parts:
        k, sep, v = part.partition("=")
        if not sep:
            raise LineProblem(None, f"expected key=value pairs, got {_show(part)}")
        fields.setdefault(k, v)
    us = _ts_us(fields["ts"])
    gid = _digits(fields.get("gid"), "gid")
    kind_name = fields.get("type")
    if not kind_name:
        raise LineProblem("type", "missing")
    if kind_name == "item_get":
        kind = FETCH
    elif kind_name == "item_store":
        kind = STORE
    else:
        return WatchLine(OTHER, server, us=us, gid=gid, type=kind_name)
    status = fields.get("status")
    if not status:
        raise LineProblem("status", "missing")
    return WatchLine(
        kind,
        server,
        us=us,
        gid=gid,
        type=kind_name,
        key=_key(fields.get("key")),
        status=status,
        cfd=_digits(fields.get("cfd"), "cfd", signed=True),
        size=_digits(fields["size"], "size") if "size" in fields else -1,
    )


@dataclass(slots=True)
class Fetch:
    """One key of a request: its source line, ts (µs), key and value size (None when it was not a hit)."""

    line: int
    us: int
    key: str
    size: int | None


@dataclass(slots=True)
class Request:
    """The fetches of one request, in the order memcached logged them; `conn` is (server, cfd)."""

    conn: tuple[str, int]
    fetches: list[Fetch]

    @property
    def us(self) -> int:
        """The request's arrival: its first fetch's ts."""
        return self.fetches[0].us


@dataclass(slots=True)
class _Open:
    fetches: list[Fetch]
    keys: set[str]
    last_us: int


@dataclass
class Grouper:
    """Groups the fetch lines of a watch log into requests (the heuristic in the module doc), line by line.

    Per connection it holds its open request (and the key of a failed store, whose lookup follows): memory grows
    with the connections and the largest request, not with the log. `add` and `finish` return the requests they
    close. The counters say what the log held.
    """

    gap_us: int = DEFAULT_GAP_US
    fetches: int = 0
    stores: int = 0
    lookups: int = 0  # fetches that were a store's own lookup, left out
    skipped: int = 0
    dropped: int = 0
    other: Counter[str] = field(default_factory=Counter)
    _open: dict[tuple[str, int], _Open] = field(default_factory=dict)
    _after_failed: dict[tuple[str, int], str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.gap_us < 0:
            raise ValueError("gap_us must be >= 0")

    @property
    def lost(self) -> int:
        return self.skipped + self.dropped

    @property
    def open_requests(self) -> int:
        return len(self._open)

    def add(self, line: WatchLine, number: int) -> list[Request]:
        kind = line.kind
        if kind == FETCH:
            return self._fetch(line, number)
        if kind == STORE:
            return self._store(line)
        if kind == SKIPPED:
            self.skipped += line.count
        elif kind == DROPPED:
            self.dropped += line.count
        elif kind == OTHER:
            self.other[line.type] += 1
        return []

    def _fetch(self, line: WatchLine, number: int) -> list[Request]:
        conn = (line.server, line.cfd)
        self.fetches += 1
        if self._after_failed and self._after_failed.pop(conn, None) == line.key:
            self.lookups += 1
            return []
        fetch = Fetch(number, line.us, line.key, line.size if line.status == "found" and line.size >= 0 else None)
        o = self._open.get(conn)
        if o is not None and line.key not in o.keys and abs(line.us - o.last_us) <= self.gap_us:
            o.fetches.append(fetch)
            o.keys.add(line.key)
            o.last_us = line.us
            return []
        self._open[conn] = _Open([fetch], {line.key}, line.us)
        return [] if o is None else [Request(conn, o.fetches)]

    def _store(self, line: WatchLine) -> list[Request]:
        conn = (line.server, line.cfd)
        self.stores += 1
        self._after_failed.pop(conn, None)
        o = self._open.pop(conn, None)
        if line.status in _FAILED_ALLOC:
            self._after_failed[conn] = line.key
        elif o is not None and o.fetches[-1].key == line.key:
            o.fetches.pop()
            self.lookups += 1
        return [Request(conn, o.fetches)] if o is not None and o.fetches else []

    def finish(self) -> list[Request]:
        """The requests still open at the end of the log, in the order they started."""
        out = [Request(conn, o.fetches) for conn, o in self._open.items()]
        self._open.clear()
        self._after_failed.clear()
        return sorted(out, key=lambda r: r.fetches[0].line)
