"""The generators' plan: which request is sent when, to which arm, as which queries with which bound values.

A plan is one file, big-endian:

```
"TTPLAN1\\n"                 8 bytes, the magic (both versions)
H                          u32, the length of the header
header                     H bytes of UTF-8 JSON: {"format": "tailtune-replay-plan", "version": 2,
                           "arms": [{"name": NAME, "statement": CQL}, ...], "requests": N, "queries": Q}
N requests, each:
  offset_us                u64, the intended send time in µs from the plan's start (non-decreasing)
  arm                      u16, the index of its arm in "arms"
  q                        u16, how many queries it sends (1 to 16384; Q in all)
  q queries, each:
    k                      u16, how many values it binds
    k values, each         i32 length (-1: null) and that many bytes: the value serialized as CQL's native
                           protocol carries it (`encode_value`, `encode_list`), bound as is to the k-th marker
```

Version 1 (still read; `write_plan` writes version 2) has no `q` and no `"queries"`: each request is one query,
its `k` and values right after its arm.

**A request is one application request**: its queries are sent together at its intended time (one after the other
from the scheduling thread, without waiting for any answer), and its latency runs from that intended time to the
answer of its **last** query; it fails when any of its queries fails (a timeout when the first query to fail timed
out). A multiget of the live replay is one request: one query per key (`WHERE k = ?`, the `per-partition` shape) or
one per chunk of keys (`WHERE k IN ?` bound to the chunk's keys as one serialized list, the `in` shape).

An arm is one config under test (in the live replay, one twin scratch table): its name (`[A-Za-z0-9_-]{1,64}`,
the name of its execution profile) and the one statement each of its queries runs, with one bind marker per
value (for a read by partition key, `SELECT ... FROM ks.table WHERE pk1 = ? AND pk2 = ?`). The values are bytes,
so neither generator needs the key's types: the plan writer serializes them, and the token the driver routes by
is computed from those bytes where the statement has a routing key (`IN ?` has none: module doc of
`kinds.cassandra.replay.live`).

Limits (`read_plan` and the Java generator refuse past them): 64 arms, 16 KiB of statement, 16384 queries per
request and 100 million in all, 64 values per query of at most 64 KiB each (an `IN` list is one value: its
keys serialized, 4 bytes of length each, in 64 KiB), 50 million requests, a 16 MiB header.
"""

from __future__ import annotations

import json
import re
import struct
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import IO, Final

from base.errors import TailtuneError

__all__ = [
    "MAGIC",
    "MAX_QUERIES",
    "MAX_VALUE_BYTES",
    "Plan",
    "PlanArm",
    "PlanError",
    "encode_list",
    "encode_value",
    "read_plan",
    "write_plan",
]

MAGIC: Final = b"TTPLAN1\n"
FORMAT: Final = "tailtune-replay-plan"
VERSION: Final = 2
VERSIONS: Final = (1, 2)
MAX_ARMS: Final = 64
MAX_STATEMENT: Final = 16384
MAX_VALUES: Final = 64
MAX_VALUE_BYTES: Final = 1 << 16
MAX_QUERIES: Final = 16384
MAX_TOTAL_QUERIES: Final = 100_000_000
MAX_REQUESTS: Final = 50_000_000
MAX_HEADER: Final = 1 << 24
ARM_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")

_REQUEST: Final = struct.Struct(">QHH")
_COUNT: Final = struct.Struct(">H")
_LENGTH: Final = struct.Struct(">i")

Value = bytes | None
Query = tuple[Value, ...]


class PlanError(TailtuneError):
    """A plan that breaks the format or its limits (exit code 2, as bad input)."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(f"plan: {message}")


@dataclass(frozen=True)
class PlanArm:
    """One arm: its name (its execution profile's) and the statement its queries run."""

    name: str
    statement: str


@dataclass(frozen=True)
class Plan:
    """Requests in send order: `offsets_us[i]` (from the start), `arms[arm[i]]`, `queries[i]` (each query its
    values, serialized)."""

    arms: tuple[PlanArm, ...]
    offsets_us: tuple[int, ...]
    arm: tuple[int, ...]
    queries: tuple[tuple[Query, ...], ...]

    @classmethod
    def of(cls, arms: Sequence[PlanArm], requests: Iterable[tuple[int, int, Sequence[Value]]]) -> Plan:
        """A plan of one query per request from (offset µs, arm index, values) triples, checked (`check`)."""
        return cls.multi(arms, ((offset, a, (vs,)) for offset, a, vs in requests))

    @classmethod
    def multi(cls, arms: Sequence[PlanArm],
              requests: Iterable[tuple[int, int, Sequence[Sequence[Value]]]]) -> Plan:
        """A plan from (offset µs, arm index, queries) triples, each query its values, checked (`check`)."""
        offsets: list[int] = []
        which: list[int] = []
        queries: list[tuple[Query, ...]] = []
        for offset, a, qs in requests:
            offsets.append(int(offset))
            which.append(int(a))
            queries.append(tuple(tuple(q) for q in qs))
        plan = cls(tuple(arms), tuple(offsets), tuple(which), tuple(queries))
        plan.check()
        return plan

    def __len__(self) -> int:
        return len(self.offsets_us)

    def counts(self) -> list[int]:
        """Requests per arm."""
        out = [0] * len(self.arms)
        for a in self.arm:
            out[a] += 1
        return out

    def query_counts(self, end: int | None = None) -> list[int]:
        """Queries per arm of requests [0, end) (all: None)."""
        out = [0] * len(self.arms)
        for a, qs in zip(self.arm[:end], self.queries[:end], strict=True):
            out[a] += len(qs)
        return out

    def check(self) -> None:
        """PlanError unless the plan keeps the format's rules and limits."""
        if not 1 <= len(self.arms) <= MAX_ARMS:
            raise PlanError(f"1 to {MAX_ARMS} arms expected, not {len(self.arms)}")
        names = [a.name for a in self.arms]
        for a in self.arms:
            if not isinstance(a.name, str) or not ARM_NAME.fullmatch(a.name):
                raise PlanError(f"arm name {a.name!r} is not [A-Za-z0-9_-]{{1,64}}")
            if not isinstance(a.statement, str) or not a.statement.strip() or len(a.statement) > MAX_STATEMENT:
                raise PlanError(f"arm {a.name}: a statement of 1 to {MAX_STATEMENT} characters expected")
        if len(set(names)) != len(names):
            raise PlanError("two arms have one name")
        n = len(self.offsets_us)
        if not n == len(self.arm) == len(self.queries):
            raise PlanError("offsets, arms and queries differ in length")
        if n > MAX_REQUESTS:
            raise PlanError(f"{n} requests, over {MAX_REQUESTS}")
        previous = 0
        total = 0
        for i in range(n):
            offset, k, qs = self.offsets_us[i], self.arm[i], self.queries[i]
            if offset < previous or offset >= 1 << 63:
                raise PlanError(f"request {i}: offset {offset} is before the previous one's or out of range")
            if not 0 <= k < len(self.arms):
                raise PlanError(f"request {i}: no arm {k}")
            if not 1 <= len(qs) <= MAX_QUERIES:
                raise PlanError(f"request {i}: {len(qs)} queries, not 1 to {MAX_QUERIES}")
            total += len(qs)
            for vs in qs:
                if len(vs) > MAX_VALUES:
                    raise PlanError(f"request {i}: a query of {len(vs)} values, over {MAX_VALUES}")
                for v in vs:
                    if v is not None and (not isinstance(v, bytes) or len(v) > MAX_VALUE_BYTES):
                        raise PlanError(f"request {i}: a value is not bytes of at most {MAX_VALUE_BYTES}")
            previous = offset
        if total > MAX_TOTAL_QUERIES:
            raise PlanError(f"{total} queries, over {MAX_TOTAL_QUERIES}")


def write_plan(plan: Plan, path: Path) -> Path:
    """Write `plan` (checked first) to `path` as a version 2 plan; returns `path`."""
    plan.check()
    header = json.dumps(
        {
            "format": FORMAT,
            "version": VERSION,
            "arms": [{"name": a.name, "statement": a.statement} for a in plan.arms],
            "requests": len(plan),
            "queries": sum(len(qs) for qs in plan.queries),
        },
        separators=(",", ":"),
    ).encode()
    with path.open("wb") as out:
        out.write(MAGIC)
        out.write(struct.pack(">I", len(header)))
        out.write(header)
        pack, count, length = _REQUEST.pack, _COUNT.pack, _LENGTH.pack
        for offset, a, qs in zip(plan.offsets_us, plan.arm, plan.queries, strict=True):
            parts = [pack(offset, a, len(qs))]
            for vs in qs:
                parts.append(count(len(vs)))
                for v in vs:
                    if v is None:
                        parts.append(length(-1))
                    else:
                        parts.append(length(len(v)))
                        parts.append(v)
            out.write(b"".join(parts))
    return path


def _exact(src: IO[bytes], n: int, what: str) -> bytes:
    data = src.read(n)
    if len(data) != n:
        raise PlanError(f"the file ends inside {what}")
    return data


def _values(src: IO[bytes], k: int, i: int) -> Query:
    if k > MAX_VALUES:
        raise PlanError(f"request {i}: {k} values, over {MAX_VALUES}")
    vs: list[Value] = []
    for _ in range(k):
        (length,) = _LENGTH.unpack(_exact(src, 4, f"request {i}"))
        if length == -1:
            vs.append(None)
        elif 0 <= length <= MAX_VALUE_BYTES:
            vs.append(_exact(src, length, f"request {i}"))
        else:
            raise PlanError(f"request {i}: a value of length {length}")
    return tuple(vs)


def read_plan(path: Path) -> Plan:
    """The plan in `path` (version 1 or 2), read as untrusted input (PlanError for any break of the format or its
    limits)."""
    with path.open("rb") as src:
        if _exact(src, len(MAGIC), "the magic") != MAGIC:
            raise PlanError("the file does not start with TTPLAN1")
        (size,) = struct.unpack(">I", _exact(src, 4, "the header length"))
        if not 0 < size <= MAX_HEADER:
            raise PlanError(f"a header of {size} bytes")
        try:
            header = json.loads(_exact(src, size, "the header"))
        except ValueError:
            raise PlanError("the header is not JSON") from None
        version = header.get("version") if isinstance(header, dict) else None
        if isinstance(version, bool) or version not in VERSIONS:
            raise PlanError("the header is not a version 1 or 2 plan's")
        arms_raw = header.get("arms")
        if not isinstance(arms_raw, list):
            raise PlanError("the header has no list of arms")
        arms = []
        for a in arms_raw:
            if not isinstance(a, dict) or not isinstance(a.get("name"), str) or not isinstance(a.get("statement"), str):
                raise PlanError("an arm is not {name, statement}")
            arms.append(PlanArm(a["name"], a["statement"]))
        n = header.get("requests")
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= MAX_REQUESTS:
            raise PlanError("the header's request count is not 0 to 50 million")
        total = header.get("queries", n) if version == 2 else n
        if not isinstance(total, int) or isinstance(total, bool) or not 0 <= total <= MAX_TOTAL_QUERIES:
            raise PlanError(f"the header's query count is not 0 to {MAX_TOTAL_QUERIES}")
        offsets: list[int] = []
        which: list[int] = []
        queries: list[tuple[Query, ...]] = []
        seen = 0
        for i in range(n):
            offset, a, q = _REQUEST.unpack(_exact(src, _REQUEST.size, f"request {i}"))
            if version == 1:
                qs: tuple[Query, ...] = (_values(src, q, i),)
            else:
                if not 1 <= q <= MAX_QUERIES:
                    raise PlanError(f"request {i}: {q} queries, not 1 to {MAX_QUERIES}")
                seen += q
                if seen > total:
                    raise PlanError(f"request {i}: more queries than the header's {total}")
                qs = tuple(_values(src, _COUNT.unpack(_exact(src, 2, f"request {i}"))[0], i) for _ in range(q))
            offsets.append(offset)
            which.append(a)
            queries.append(qs)
        if version == 2 and seen != total:
            raise PlanError(f"{seen} queries, the header says {total}")
        if src.read(1):
            raise PlanError("bytes after the last request")
    plan = Plan(tuple(arms), tuple(offsets), tuple(which), tuple(queries))
    plan.check()
    return plan


def encode_list(cql_type: str, values: Sequence[object]) -> bytes:
    """`values` serialized as the native protocol (v3 and later) carries a CQL `list<cql_type>` (the value an
    `IN ?` marker binds): an i32 count, then each element as an i32 length and its bytes (`encode_value`).
    ValueError for a null element, or a type or value `encode_value` does not take."""
    parts = [_LENGTH.pack(len(values))]
    for v in values:
        b = encode_value(cql_type, v)
        if b is None:
            raise ValueError("a list element cannot be null")
        parts.append(_LENGTH.pack(len(b)))
        parts.append(b)
    return b"".join(parts)


_INTS: Final = {"tinyint": ">b", "smallint": ">h", "int": ">i", "bigint": ">q", "counter": ">q", "timestamp": ">q"}


def encode_value(cql_type: str, value: object) -> Value:
    """`value` serialized as the native protocol carries a CQL `cql_type` (text, ascii, varchar, blob, boolean,
    tinyint, smallint, int, bigint, counter, timestamp (ms since the epoch), float, double, uuid, timeuuid, varint,
    inet); None is null. ValueError for a type or a value it does not take."""
    if value is None:
        return None
    t = cql_type.strip().lower()
    if t in ("text", "varchar", "ascii"):
        if not isinstance(value, str):
            raise ValueError(f"a {t} value must be str, not {type(value).__name__}")
        return value.encode("ascii" if t == "ascii" else "utf-8")
    if t == "blob":
        if not isinstance(value, bytes | bytearray):
            raise ValueError("a blob value must be bytes")
        return bytes(value)
    if t == "boolean":
        if not isinstance(value, bool):
            raise ValueError("a boolean value must be bool")
        return b"\x01" if value else b"\x00"
    if t in _INTS:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"a {t} value must be int")
        try:
            return struct.pack(_INTS[t], value)
        except struct.error:
            raise ValueError(f"{value} is out of a {t}'s range") from None
    if t in ("float", "double"):
        if not isinstance(value, int | float | Decimal) or isinstance(value, bool):
            raise ValueError(f"a {t} value must be a number")
        return struct.pack(">f" if t == "float" else ">d", float(value))
    if t in ("uuid", "timeuuid"):
        u = value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
        return u.bytes
    if t == "varint":
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError("a varint value must be int")
        size = max(1, (value.bit_length() + 8) // 8)
        return value.to_bytes(size, "big", signed=True)
    if t == "inet":
        import ipaddress

        return ipaddress.ip_address(str(value)).packed
    raise ValueError(f"CQL type {cql_type!r} is not one encode_value takes")
