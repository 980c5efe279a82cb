"""The generators' plan: which request is sent when, to which arm, with which partition key values.

A plan is one file, big-endian:

```
"TTPLAN1\\n"                 8 bytes, the magic
H                          u32, the length of the header
header                     H bytes of UTF-8 JSON: {"format": "tailtune-replay-plan", "version": 1,
                           "arms": [{"name": NAME, "statement": CQL}, ...], "requests": N}
N requests, each:
  offset_us                u64, the intended send time in µs from the plan's start (non-decreasing)
  arm                      u16, the index of its arm in "arms"
  k                        u16, how many values it binds
  k values, each           i32 length (-1: null) and that many bytes: the value serialized as CQL's native
                           protocol carries it (`encode_value`), bound as is to the statement's k-th marker
```

An arm is one config under test (in the live replay, one twin scratch table): its name (`[A-Za-z0-9_-]{1,64}`,
the name of its execution profile) and the statement its requests run, with one bind marker per value (for a
read by partition key, `SELECT ... FROM ks.table WHERE pk1 = ? AND pk2 = ?`). The values are bytes, so neither
generator needs the key's types: the plan writer serializes them (`encode_value` for the usual types), and the
token the driver routes by is computed from those bytes.

Limits (`read_plan` and the Java generator refuse past them): 64 arms, 16 KiB of statement, 64 values of at most
64 KiB each, 50 million requests, a 16 MiB header.
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
    "Plan",
    "PlanArm",
    "PlanError",
    "encode_value",
    "read_plan",
    "write_plan",
]

MAGIC: Final = b"TTPLAN1\n"
FORMAT: Final = "tailtune-replay-plan"
VERSION: Final = 1
MAX_ARMS: Final = 64
MAX_STATEMENT: Final = 16384
MAX_VALUES: Final = 64
MAX_VALUE_BYTES: Final = 1 << 16
MAX_REQUESTS: Final = 50_000_000
MAX_HEADER: Final = 1 << 24
ARM_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")

_REQUEST: Final = struct.Struct(">QHH")
_LENGTH: Final = struct.Struct(">i")

Value = bytes | None


class PlanError(TailtuneError):
    """A plan that breaks the format or its limits (exit code 2, as bad input)."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(f"plan: {message}")


@dataclass(frozen=True)
class PlanArm:
    """One arm: its name (its execution profile's) and the statement its requests run."""

    name: str
    statement: str


@dataclass(frozen=True)
class Plan:
    """Requests in send order: `offsets_us[i]` (from the start), `arms[arm[i]]`, `values[i]` (serialized)."""

    arms: tuple[PlanArm, ...]
    offsets_us: tuple[int, ...]
    arm: tuple[int, ...]
    values: tuple[tuple[Value, ...], ...]

    @classmethod
    def of(cls, arms: Sequence[PlanArm], requests: Iterable[tuple[int, int, Sequence[Value]]]) -> Plan:
        """A plan from (offset µs, arm index, values) triples, checked (`check`)."""
        offsets: list[int] = []
        which: list[int] = []
        values: list[tuple[Value, ...]] = []
        for offset, a, vs in requests:
            offsets.append(int(offset))
            which.append(int(a))
            values.append(tuple(vs))
        plan = cls(tuple(arms), tuple(offsets), tuple(which), tuple(values))
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
        if not n == len(self.arm) == len(self.values):
            raise PlanError("offsets, arms and values differ in length")
        if n > MAX_REQUESTS:
            raise PlanError(f"{n} requests, over {MAX_REQUESTS}")
        previous = 0
        for i in range(n):
            offset, k, vs = self.offsets_us[i], self.arm[i], self.values[i]
            if offset < previous or offset >= 1 << 63:
                raise PlanError(f"request {i}: offset {offset} is before the previous one's or out of range")
            if not 0 <= k < len(self.arms):
                raise PlanError(f"request {i}: no arm {k}")
            if len(vs) > MAX_VALUES:
                raise PlanError(f"request {i}: {len(vs)} values, over {MAX_VALUES}")
            for v in vs:
                if v is not None and (not isinstance(v, bytes) or len(v) > MAX_VALUE_BYTES):
                    raise PlanError(f"request {i}: a value is not bytes of at most {MAX_VALUE_BYTES}")
            previous = offset


def write_plan(plan: Plan, path: Path) -> Path:
    """Write `plan` (checked first) to `path`; returns `path`."""
    plan.check()
    header = json.dumps(
        {
            "format": FORMAT,
            "version": VERSION,
            "arms": [{"name": a.name, "statement": a.statement} for a in plan.arms],
            "requests": len(plan),
        },
        separators=(",", ":"),
    ).encode()
    with path.open("wb") as out:
        out.write(MAGIC)
        out.write(struct.pack(">I", len(header)))
        out.write(header)
        pack, length = _REQUEST.pack, _LENGTH.pack
        for offset, a, vs in zip(plan.offsets_us, plan.arm, plan.values, strict=True):
            parts = [pack(offset, a, len(vs))]
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


def read_plan(path: Path) -> Plan:
    """The plan in `path`, read as untrusted input (PlanError for any break of the format or its limits)."""
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
        if not isinstance(header, dict) or header.get("version") != VERSION:
            raise PlanError(f"the header is not a version {VERSION} plan's")
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
        offsets: list[int] = []
        which: list[int] = []
        values: list[tuple[Value, ...]] = []
        for i in range(n):
            offset, a, k = _REQUEST.unpack(_exact(src, _REQUEST.size, f"request {i}"))
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
            offsets.append(offset)
            which.append(a)
            values.append(tuple(vs))
        if src.read(1):
            raise PlanError("bytes after the last request")
    plan = Plan(tuple(arms), tuple(offsets), tuple(which), tuple(values))
    plan.check()
    return plan


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
