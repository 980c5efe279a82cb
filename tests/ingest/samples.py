"""Valid trace files of every format, written from rows (ts, key, value size): the fuzz tests' starting points
and the registry test's samples. A format of the registry this cannot write fails those tests until it can."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["FQL_TABLE", "Row", "fql_dump", "hex_dump", "valid_file"]

T0 = datetime(2016, 2, 1, 16, 46, 4, tzinfo=UTC)

Row = tuple[int, str, int]

#: The table of the full query log samples, as the log's own CREATE TABLE declares it.
FQL_TABLE = "CREATE TABLE ks.t (k text PRIMARY KEY, v blob)"
_FQL_T0_MS = 1_700_000_000_000


def hex_dump(value: bytes) -> str:
    """A value as `fqltool dump` prints it: Dump.java's `toHexString` (16 bytes a row, an 8-digit offset, rows
    equal to the one before left out behind a `........` line, cut at 1,024 bytes with `... truncated`)."""
    n = min(1024, len(value))
    if n == 0:
        return ""
    out: list[str] = []
    last = [0] * 16
    sep = ""
    end = (n + 15) // 16 * 16
    for i in range(0, end, 16):
        if i + 16 < end:
            same = True
            for j in range(16):
                if i + j >= n:
                    break
                same &= value[i + j] == last[j]
                last[j] = value[i + j]
            if i > 0 and same:
                sep = "........\n"
                continue
        row = sep + f"{i:08x}"
        sep = ""
        for j in range(16):
            row += (" " if j == 8 else "") + ("   " if i + j >= n else f" {value[i + j]:02X}")
        row += " "
        for j in range(16):
            ch = value[i + j] if i + j < n else None
            row += (" " if j == 8 else "") + (" " if ch is None else chr(ch) if 32 <= ch <= 126 else "\u00b7")
        out.append(row + "\n")
    return "".join(out) + ("... truncated\n" if n < len(value) else "")


def fql_dump(records: list[dict[str, object]]) -> str:
    """The text `fqltool dump` prints for `records` (Dump.java's layout, Cassandra 5.0): each a dict with `type`
    (single-query or batch), `start_ms`, and `statements`, a list of (query, values), a value bytes or None."""
    out: list[str] = []
    for r in records:
        start = int(r["start_ms"])  # type: ignore[call-overload]
        out.append(f"Type: {r['type']}\nQuery start time: {start}\nProtocol version: 5\n")
        out.append(f"Generated timestamp:-9223372036854775808\nGenerated nowInSeconds:{start // 1000}\n")
        if r["type"] == "batch":
            out.append(f"Batch type: {r.get('batch_type', 'LOGGED')}\n")
        for query, values in r["statements"]:  # type: ignore[attr-defined]
            out.append(f"Query: {query}\nValues: \n")
            for v in values:
                out.append(("null\n" if v is None else hex_dump(v)) + "-----\n")
        out.append("\n")
    return "".join(out)


def valid_file(fmt: str, rows: list[Row]) -> tuple[bytes, list[str]]:
    """A valid file of `fmt` holding `rows` (ts, key, size), and the dataset's keys in order."""
    keys = [k for _, k, _ in rows]
    if fmt in ("csv", "tsv"):
        d = "," if fmt == "csv" else "\t"
        text = f"ts{d}key{d}value_size\n" + "".join(f"{t}{d}{k}{d}{s}\n" for t, k, s in rows)
    elif fmt == "jsonl":
        text = "".join(json.dumps({"ts": t, "key": k, "value_size": s}) + "\n" for t, k, s in rows)
    elif fmt == "requests":
        text = "".join(json.dumps({"ts": t, "keys": [k], "sizes": [s]}) + "\n" for t, k, s in rows)
    elif fmt == "twitter":
        text = "".join(f"{t},{k},{len(k)},{s},c{t % 3},get,0\n" for t, k, s in rows)
    elif fmt == "meta-kv":
        text = "key,op,size,op_count,key_size\n" + "".join(f"{k},GET,{s},1,{len(k)}\n" for _, k, s in rows)
    elif fmt == "tencent-photo":
        stamp = [(T0 + timedelta(seconds=t)).strftime("%Y%m%d%H%M%S") for t, _, _ in rows]
        text = "".join(f"{ts} {k} jpg m {s} 1 PHONE 3\n" for ts, (_, k, s) in zip(stamp, rows, strict=True))
        keys = [f"{k}:jpg" for k in keys]
    elif fmt == "cassandra-fql-dump":
        records: list[dict[str, object]] = [
            {"type": "single-query", "start_ms": _FQL_T0_MS - 1000, "statements": [(FQL_TABLE, [])]}
        ]
        records += [
            {
                "type": "single-query",
                "start_ms": _FQL_T0_MS + 1000 * t,
                "statements": [("SELECT * FROM ks.t WHERE k = ?", [k.encode()])],
            }
            for t, k, _ in rows
        ]
        text = fql_dump(records)
    elif fmt == "keys-bin":
        numbers = [int.from_bytes(k.encode()[:7].ljust(7, b"0"), "big") for k in keys]
        return b"".join(n.to_bytes(8, "big") for n in numbers), [str(n) for n in numbers]
    elif fmt == "memcached-watch":  # memcached's watch: one hit per row, each its own request (a second apart)
        text = "OK\n" + "".join(
            f"ts={t}.{i} gid={i + 1} type=item_get key={k} status=found clsid=1 cfd=17 size={s}\n"
            for i, (t, k, s) in enumerate(rows)
        )
    elif fmt == "tailtune-client":  # one upload of one client: its header, then one request per row
        header = {"schema": "tailtune.client.capture/1", "client": {"name": "tailtune-client", "id": "c1"},
                  "kind": "memcached", "tables": False, "servers": ["127.0.0.1:11211"], "hashing": "rendezvous-murmur3",
                  "key_form": "plain", "sample_rate": 1.0, "window": {"start": 0, "end": 1e9},
                  "records": len(rows), "dropped": {"memory": 0, "bandwidth": 0, "unkeyed": 0}}
        text = json.dumps(header) + "\n" + "".join(
            json.dumps({"ts": t, "op": "get", "keys": [k], "sizes": [s], "servers": [0], "latency_us": 80.0,
                        "config_version": None, "failed": False}) + "\n"
            for t, k, s in rows
        )
    elif fmt == "parquet":
        sink = io.BytesIO()
        table = pa.table({"ts": [float(t) for t, _, _ in rows], "key": keys, "value_size": [s for *_, s in rows]})
        pq.write_table(table, sink)
        return sink.getvalue(), keys
    else:
        raise AssertionError(f"no sample writer for the format {fmt!r}: add one to tests/ingest/samples.py")
    return text.encode(), keys
