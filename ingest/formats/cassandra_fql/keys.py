"""A partition key's value as the dataset's `key` string, from its serialized bytes (a bound value) or from a CQL
constant (a value written in the statement), by the column's CQL type — both give the same string for the same
value, so a key read by a prepared statement and by a plain one is one key.

| CQL type | key |
|---|---|
| text, varchar, ascii | the text itself |
| int, bigint, smallint, tinyint, varint, counter | the decimal integer |
| uuid, timeuuid | the canonical lower-case form |
| blob | `0x` and the lower-case hex digits |
| boolean | `true` / `false` |
| timestamp | milliseconds since the epoch (decimal; a date-time constant is converted, UTC unless it says) |
| inet | the address in its compressed form |
| double, float | the shortest decimal that reads back as the value (`float` as a 32-bit float) |
| any other type | `0x` and the hex digits of the serialized value (bound values only) |

(Any other type: date, time, decimal, duration, tuples, frozen collections, user-defined types.)

A composite partition key is its columns' strings in key order joined by `:`, each with `\\` and `:` escaped by a
backslash. `ValueProblem` says what is wrong with a value.
"""

from __future__ import annotations

import ipaddress
import struct
import uuid
from datetime import UTC, datetime
from typing import Final

import numpy as np

from ingest.formats.cassandra_fql.cql import Literal

__all__ = ["SUPPORTED", "ValueProblem", "compose", "decode", "from_literal", "split_collection"]


class ValueProblem(ValueError):
    """A value that is not one of its CQL type."""


_TEXT: Final = frozenset({"text", "varchar", "ascii"})
_INTS: Final = {"int": 4, "bigint": 8, "smallint": 2, "tinyint": 1, "counter": 8}
#: The types whose values get a readable form (the others: their bytes in hex).
SUPPORTED: Final = frozenset(
    {*_TEXT, *_INTS, "varint", "uuid", "timeuuid", "blob", "boolean", "timestamp", "inet", "double", "float"}
)


def _base(cql_type: str) -> str:
    t = cql_type.strip().lower()
    return t[len("frozen<") : -1] if t.startswith("frozen<") and t.endswith(">") else t


def decode(cql_type: str, raw: bytes) -> str:
    """The key string of a serialized value of `cql_type`."""
    t = _base(cql_type)
    if t in _TEXT:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueProblem(f"{t} value is not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
        if t == "ascii" and not text.isascii():
            raise ValueProblem("ascii value has non-ASCII bytes")
        return text
    if t in _INTS:
        if len(raw) != _INTS[t]:
            raise ValueProblem(f"{t} value has {len(raw)} bytes, not {_INTS[t]}")
        return str(int.from_bytes(raw, "big", signed=True))
    if t == "varint":
        if not raw:
            raise ValueProblem("varint value is empty")
        return str(int.from_bytes(raw, "big", signed=True))
    if t in ("uuid", "timeuuid"):
        if len(raw) != 16:
            raise ValueProblem(f"{t} value has {len(raw)} bytes, not 16")
        return str(uuid.UUID(bytes=raw))
    if t == "boolean":
        if len(raw) != 1:
            raise ValueProblem(f"boolean value has {len(raw)} bytes, not 1")
        return "true" if raw[0] else "false"
    if t == "timestamp":
        if len(raw) != 8:
            raise ValueProblem(f"timestamp value has {len(raw)} bytes, not 8")
        return str(int.from_bytes(raw, "big", signed=True))
    if t == "inet":
        if len(raw) not in (4, 16):
            raise ValueProblem(f"inet value has {len(raw)} bytes, not 4 or 16")
        return str(ipaddress.ip_address(raw))
    if t == "double":
        if len(raw) != 8:
            raise ValueProblem(f"double value has {len(raw)} bytes, not 8")
        return repr(struct.unpack(">d", raw)[0])
    if t == "float":
        if len(raw) != 4:
            raise ValueProblem(f"float value has {len(raw)} bytes, not 4")
        return _float32(struct.unpack(">f", raw)[0])
    return "0x" + raw.hex()


def _float32(value: float) -> str:
    """The shortest decimal that reads back as this 32-bit float."""
    return str(np.format_float_positional(np.float32(value), unique=True, trim="-"))


def _number(lit: Literal) -> str:
    text = lit.text
    if text.lstrip("-").lower() == "nan":
        return "nan"
    if text.lstrip("-").lower() == "infinity":
        return "-inf" if text.startswith("-") else "inf"
    return text


def from_literal(cql_type: str, lit: Literal) -> str:
    """The key string of a constant written in the statement, for a column of `cql_type`."""
    t = _base(cql_type)
    kind = lit.kind
    if kind == "null":
        raise ValueProblem("a partition key cannot be null")
    if t in _TEXT:
        if kind != "string":
            raise ValueProblem(f"{t} value written as a {kind} constant: {lit.text}")
        return lit.text
    if t in _INTS or t == "varint":
        try:
            value = int(lit.text)
        except ValueError:
            raise ValueProblem(f"{t} value is not an integer: {lit.text}") from None
        if t in _INTS and not -(1 << (8 * _INTS[t] - 1)) <= value < 1 << (8 * _INTS[t] - 1):
            raise ValueProblem(f"{t} value out of range: {lit.text}")
        return str(value)
    if t in ("uuid", "timeuuid"):
        if kind != "uuid":
            raise ValueProblem(f"{t} value is not a UUID: {lit.text}")
        return str(uuid.UUID(lit.text))
    if t == "blob":
        if kind != "blob" or len(lit.text) % 2:
            raise ValueProblem(f"blob value is not a 0x... constant of whole bytes: {lit.text}")
        return "0x" + lit.text[2:].lower()
    if t == "boolean":
        if kind != "bool":
            raise ValueProblem(f"boolean value is not true or false: {lit.text}")
        return lit.text
    if t == "timestamp":
        if kind == "number":
            return str(int(lit.text))
        if kind == "string":
            return str(_timestamp_ms(lit.text))
        raise ValueProblem(f"timestamp value written as a {kind} constant: {lit.text}")
    if t == "inet":
        try:
            return str(ipaddress.ip_address(lit.text))
        except ValueError:
            raise ValueProblem(f"inet value is not an address: {lit.text}") from None
    if t in ("double", "float"):
        if kind != "number":
            raise ValueProblem(f"{t} value is not a number: {lit.text}")
        real = float(_number(lit))
        return repr(real) if t == "double" else _float32(real)
    raise ValueProblem(f"a {t} constant in the statement cannot be read (only bound values of this type can)")


def _timestamp_ms(text: str) -> int:
    s = text.strip().replace(" ", "T", 1)
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    if len(s) >= 5 and s[-5] in "+-" and s[-4:].isdigit():  # +0000 → +00:00
        s = s[:-2] + ":" + s[-2:]
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        raise ValueProblem(f"timestamp value is not a date-time: {text}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    delta = dt - datetime(1970, 1, 1, tzinfo=UTC)
    return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000


def split_collection(raw: bytes) -> list[bytes]:
    """The elements of a serialized list or set (the value bound to `IN ?`): int32 count, then each element as
    int32 length + bytes."""
    if len(raw) < 4:
        raise ValueProblem(f"the list bound to IN ? has {len(raw)} bytes, fewer than its 4-byte count")
    n = int.from_bytes(raw[:4], "big", signed=True)
    if n < 0:
        raise ValueProblem(f"the list bound to IN ? has a negative count ({n})")
    out: list[bytes] = []
    at = 4
    for i in range(n):
        if at + 4 > len(raw):
            raise ValueProblem(f"the list bound to IN ? ends inside the length of element {i + 1} of {n}")
        size = int.from_bytes(raw[at : at + 4], "big", signed=True)
        at += 4
        if size < 0:
            raise ValueProblem(f"element {i + 1} of the list bound to IN ? is null")
        if at + size > len(raw):
            raise ValueProblem(f"the list bound to IN ? ends inside element {i + 1} of {n}")
        out.append(raw[at : at + size])
        at += size
    if at != len(raw):
        raise ValueProblem(f"the list bound to IN ? has {len(raw) - at} bytes after its {n} elements")
    return out


def compose(parts: list[str]) -> str:
    """A composite partition key's string: the columns' strings joined by `:`, `\\` and `:` escaped."""
    if len(parts) == 1:
        return parts[0]
    return ":".join(p.replace("\\", "\\\\").replace(":", "\\:") for p in parts)
