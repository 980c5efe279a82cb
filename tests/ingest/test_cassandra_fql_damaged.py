"""A damaged full query log is refused, a log still being written is ingested up to its last complete record with a
warning, never a silently short dataset (docs/formats.md § cassandra-fql).

The log is a real Cassandra 5.0.9 node's (`tests/ingest/data/fql-cassandra-5.0.9/`: the workload of
`test_cassandra_fql_real.py`, 25 records, logged between `nodetool enablefullquerylog` and `disablefullquerylog`;
each file stored as its bytes up to the last non-zero one, gzipped, with its size in `sizes.json`, and restored
byte for byte, sparse, as chronicle preallocates it), damaged at chosen byte offsets. The documents of a cycle file
are walked here independently of the reader, from chronicle-wire's layout: a 32-bit little-endian header
(NOT_COMPLETE 0x80000000, META_DATA 0x40000000, the length in the low 30 bits), documents aligned to 4 bytes; the
store's header (the first document) holds `writePosition`, the offset of the last complete record, and beside it
the sequence `(position << 32) | index`.
"""

from __future__ import annotations

import gzip
import json
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from ingest.store import DatasetStore

FIXTURE = Path(__file__).with_name("data") / "fql-cassandra-5.0.9"
SCHEMA = FIXTURE / "schema.cql"
NOT_COMPLETE, META_DATA, LENGTH_MASK = 0x8000_0000, 0x4000_0000, 0x3FFF_FFFF
KINDS = ("zero", "not-ready", "metadata", "truncate", "still-writing")


def _log(dst: Path) -> Path:
    """The real log, restored into `dst` (sparse)."""
    dst.mkdir(parents=True)
    for name, size in json.loads((FIXTURE / "sizes.json").read_text()).items():
        with (dst / name).open("wb") as out:
            out.write(gzip.decompress((FIXTURE / f"{name}.head.gz").read_bytes()))
            out.truncate(size)
    return dst


def _cycle_file(log_dir: Path) -> Path:
    (only,) = log_dir.glob("*.cq4")
    return only


def _data_documents(cycle_file: Path) -> list[tuple[int, int]]:
    """(offset, header) of each data record of a cycle file, in order."""
    data = cycle_file.read_bytes()
    out: list[tuple[int, int]] = []
    pos = 0
    while pos + 4 <= len(data):
        (header,) = struct.unpack_from("<I", data, pos)
        if header == 0:
            break
        assert header & NOT_COMPLETE == 0, (pos, hex(header))
        if header & META_DATA == 0:
            out.append((pos, header))
        pos += 4 + (header & LENGTH_MASK)
        pos += -pos & 3
    return out


def _damage(log_dir: Path, index: int, kind: str) -> tuple[str, int, int]:
    """Damage the data record `index` of the log's cycle file; (file name, the record's offset, its length)."""
    f = _cycle_file(log_dir)
    docs = _data_documents(f)
    offset, header = docs[index]
    with f.open("r+b") as out:
        out.seek(offset)
        if kind == "zero":
            out.write(b"\0\0\0\0")
        elif kind in ("not-ready", "still-writing"):
            out.write(struct.pack("<I", header | NOT_COMPLETE))
        elif kind == "metadata":
            out.write(struct.pack("<I", header | META_DATA))
        elif kind == "truncate":  # the file ends inside the record
            out.truncate(offset + 4 + (header & LENGTH_MASK) // 2)
        if kind == "still-writing":  # the writer had completed the record before it, not this one
            assert index == len(docs) - 1
            last, before = docs[-1][0], docs[index - 1][0]
            out.seek(0)
            head = out.read(docs[0][0])
            old = struct.pack("<qq", last, (last << 32) | (len(docs) - 1))
            assert head.count(old) == 1, "the store's writePosition"
            out.seek(head.index(old))
            out.write(struct.pack("<qq", before, (before << 32) | (len(docs) - 2)))
    return f.name, offset, header & LENGTH_MASK


def _written(home: Path) -> set[Path]:
    """What ingests left under TAILTUNE_HOME that holds data."""
    return {p for p in home.rglob("*") if p.suffix in (".parquet", ".json")}


def _ingest(cli: Any, log_dir: Path) -> Any:
    r = cli("ingest", str(log_dir), "--format", "cassandra-fql", "--schema", str(SCHEMA), "--no-grouping", "--json")
    r.stderr = " ".join(r.stderr.split())
    return r


def _requests(dataset_id: str) -> Counter[frozenset[tuple[str, str, str]]]:
    (info,) = [d for d in DatasetStore().list() if d.id == dataset_id]
    out: dict[int, set[tuple[str, str, str]]] = {}
    for r in info.read_table().to_pylist():
        out.setdefault(r["request_id"], set()).add((r["table"], r["op"], r["key"]))
    return Counter(frozenset(v) for v in out.values())


def _check(r: Any, log_dir: Path, kind: str, damaged: tuple[str, int, int], last: bool, home: Path,
           before: set[Path]) -> None:
    """Refused naming the file and the offset, with nothing written; or, for a log still being written (its last
    record not complete and the write position before it), a warning naming it and the bytes left."""
    name, offset, length = damaged
    if kind == "still-writing" and last:
        assert r.exit_code == 0, r.stderr
        summary = json.loads(r.stdout)
        assert len(summary["warnings"]) == 1 and "still being written" in summary["warnings"][0]
        assert f"warning: {log_dir}/{name}: the log is still being written: ingested up to its last complete record" \
            in r.stderr
        assert f"the record at byte {offset} is not complete yet ({4 + length:,} bytes left out)" in r.stderr
        return
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert f"error: {log_dir}/{name}: byte {offset} " in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert _written(home) == before  # no dataset, nothing half-written


def test_the_intact_log_is_read_whole(cli: Any, tailtune_home: Path, tmp_path: Path) -> None:
    r = _ingest(cli, _log(tmp_path / "log"))
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["warnings"] == [] and "warning" not in r.stderr
    assert summary["requests"] == 25  # every record of the workload (the system keyspaces' are the driver's)


@pytest.mark.parametrize(
    ("kind", "where", "says"),
    [
        ("zero", "middle", "no record header here (zero bytes): a hole in the log before its end"),
        ("zero", "last", "a hole in the log before its end (the log's write position"),
        ("not-ready", "middle", "the record is not complete (its header's not-ready bit is set) at or before"),
        ("not-ready", "last", "at or before the log's write position: the writer had completed it"),
        ("metadata", "middle", "a metadata document that is not chronicle's own ('version'"),
        ("metadata", "last", "a metadata document that is not chronicle's own ('version'"),
        ("truncate", "middle", "the file ends at byte"),
        ("truncate", "last", "the file ends at byte"),
        ("still-writing", "last", "the log is still being written"),
    ],
)
def test_a_damaged_log_is_refused_naming_the_file_and_offset(
    cli: Any, tailtune_home: Path, tmp_path: Path, kind: str, where: str, says: str
) -> None:
    log_dir = _log(tmp_path / "log")
    n = len(_data_documents(_cycle_file(log_dir)))
    index = n // 2 if where == "middle" else n - 1
    damaged = _damage(log_dir, index, kind)
    r = _ingest(cli, log_dir)
    _check(r, log_dir, kind, damaged, index == n - 1, tailtune_home, set())
    assert says in r.stderr
    if kind == "still-writing":  # every request but the unfinished record's: the batch, sent last
        full = _ingest(cli, _log(tmp_path / "intact"))
        missing = _requests(json.loads(full.stdout)["id"]) - _requests(json.loads(r.stdout)["id"])
        assert list(missing.elements()) == [
            frozenset({("fqlks.kv", "set", "w1"), ("fqlks.comp", "set", "5:z"), ("fqlks.ints", "delete", "9")})
        ]


@given(index=st.integers(min_value=0, max_value=10_000), kind=st.sampled_from(KINDS))
@hsettings(
    max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_damage_at_any_record_header_is_never_a_silent_short_dataset(
    cli: Any, tailtune_home: Path, tmp_path_factory: pytest.TempPathFactory, index: int, kind: str
) -> None:
    log_dir = _log(tmp_path_factory.mktemp("damaged") / "log")
    n = len(_data_documents(_cycle_file(log_dir)))
    index %= n
    if kind == "still-writing":
        index = max(index, 1)  # a record before it holds the write position
        if index != n - 1:
            kind = "not-ready"  # not the last record: damage, whatever the write position says
    before = _written(tailtune_home)
    damaged = _damage(log_dir, index, kind)
    _check(_ingest(cli, log_dir), log_dir, kind, damaged, index == n - 1, tailtune_home, before)
