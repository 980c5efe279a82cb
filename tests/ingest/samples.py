"""Valid trace files of every format, written from rows (ts, key, value size): the fuzz tests' starting points
and the registry test's samples. A format of the registry this cannot write fails those tests until it can."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["Row", "valid_file"]

T0 = datetime(2016, 2, 1, 16, 46, 4, tzinfo=UTC)

Row = tuple[int, str, int]


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
    elif fmt == "keys-bin":
        numbers = [int.from_bytes(k.encode()[:7].ljust(7, b"0"), "big") for k in keys]
        return b"".join(n.to_bytes(8, "big") for n in numbers), [str(n) for n in numbers]
    elif fmt == "memcached-watch":  # memcached's watch: one hit per row, each its own request (a second apart)
        text = "OK\n" + "".join(
            f"ts={t}.{i} gid={i + 1} type=item_get key={k} status=found clsid=1 cfd=17 size={s}\n"
            for i, (t, k, s) in enumerate(rows)
        )
    elif fmt == "parquet":
        sink = io.BytesIO()
        table = pa.table({"ts": [float(t) for t, _, _ in rows], "key": keys, "value_size": [s for *_, s in rows]})
        pq.write_table(table, sink)
        return sink.getvalue(), keys
    else:
        raise AssertionError(f"no sample writer for the format {fmt!r}: add one to tests/ingest/samples.py")
    return text.encode(), keys
