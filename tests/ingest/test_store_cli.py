"""Dataset ids, the store (list/get/delete) and the `ingest` / `datasets` commands."""

from __future__ import annotations

import json

import pytest

from base.errors import NotFoundError
from ingest.pipeline import dataset_id, ingest_file
from ingest.store import DatasetStore

BODY = "request_id,ts,key,value_size\n0,1.0,a,10\n0,1.0,b,20\n1,2.0,a,10\n"


def test_same_bytes_same_dataset_nothing_written(write, settings):
    p = write("t.csv", BODY)
    first = ingest_file(p, settings=settings)
    manifest_mtime = (first.path / "manifest.json").stat().st_mtime_ns
    again = ingest_file(write("copy-of-t.csv", BODY), name="other", settings=settings)
    assert (first.reused, again.reused) == (False, True)
    assert again.id == first.id and again.name == first.name
    assert (first.path / "manifest.json").stat().st_mtime_ns == manifest_mtime
    assert [d.id for d in DatasetStore(settings).list()] == [first.id]
    assert not any(settings.tmp_dir.iterdir())


def test_id_is_sha_of_source_and_options(write, settings):
    import hashlib

    p = write("t.csv", BODY)
    info = ingest_file(p, settings=settings)
    sha = hashlib.sha256(BODY.encode()).hexdigest()
    m = info.manifest
    assert m["source"]["sha256"] == sha and m["source"]["bytes"] == len(BODY)
    opts: dict[str, object] = {
        "format": "csv",
        "mapping": {},
        "group_window_s": None,
        "on_error": "fail",
        "unsorted": "reject",
    }
    assert m["ingest_options"] == opts
    canonical = json.dumps(opts, sort_keys=True, separators=(",", ":"))
    assert info.id == dataset_id(sha, opts) == hashlib.sha256(f"{sha}\n{canonical}".encode()).hexdigest()[:16]
    # an option that changes the result gives another dataset
    assert ingest_file(p, on_error="skip", settings=settings).id != info.id


def test_layout_and_manifest(write, settings):
    info = ingest_file(write("t.csv", BODY), settings=settings)
    assert info.path == settings.datasets_dir / info.id
    assert [f.name for f in info.parquet_files] == ["part-00000.parquet"]
    m = info.manifest
    for k in (
        "schema_version",
        "id",
        "name",
        "created_at",
        "source",
        "ingest_options",
        "rows",
        "requests",
        "distinct_keys",
        "ts_min",
        "ts_max",
        "columns",
        "has_value_size",
        "has_latency",
    ):
        assert k in m
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(info.parquet_files[0]).metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"


def test_writer_splits_row_groups_and_parts(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ingest.schema import canonical_schema_for
    from ingest.writer import DatasetWriter

    w = DatasetWriter(tmp_path, canonical_schema_for(set()), row_group_rows=4, file_rows=8)
    for start in range(0, 20, 3):
        n = min(3, 20 - start)
        w.write(
            pa.record_batch(
                {
                    "request_id": list(range(start, start + n)),
                    "ts": [0.0] * n,
                    "key": ["k"] * n,
                    "value_size": [None] * n,
                }
            )
        )
    files = w.close()
    assert [f.name for f in files] == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert [pq.ParquetFile(f).metadata.num_rows for f in files] == [8, 8, 4]
    assert pq.ParquetFile(files[0]).metadata.num_row_groups == 2
    ids = pa.concat_tables([pq.read_table(f) for f in files]).column("request_id").to_pylist()
    assert ids == list(range(20))


def test_get_by_prefix_and_name_and_not_found(write, settings):
    store = DatasetStore(settings)
    info = ingest_file(write("t.csv", BODY), name="mine", settings=settings)
    assert store.get(info.id[:6]).id == info.id
    assert store.get("mine").id == info.id
    with pytest.raises(NotFoundError) as exc:
        store.get("nope")
    assert exc.value.hint is not None and "tailtune datasets" in exc.value.hint
    store.delete(info.id)
    assert store.list() == [] and not info.path.exists()


def test_cli_ingest_json_and_datasets(cli, write, tailtune_home):
    p = write("t.csv", BODY)
    r = cli("ingest", str(p), "--json")
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout)
    assert (s["format"], s["rows"], s["requests"], s["distinct_keys"], s["multiget_mean"]) == ("csv", 3, 2, 2, 1.5)
    assert s["reused"] is False
    assert "format: csv (auto: " in r.stderr
    r = cli("ingest", str(p))
    assert r.exit_code == 0 and "already ingested" in r.stderr
    r = cli("datasets", "list", "--json")
    assert [d["id"] for d in json.loads(r.stdout)] == [s["id"]]
    r = cli("datasets", "show", s["id"], "--json")
    assert json.loads(r.stdout)["rows"] == 3
    r = cli("datasets")
    assert r.exit_code == 0 and s["id"][:8] in r.stdout
    r = cli("datasets", "delete", s["id"])
    assert r.exit_code == 0 and f"deleted dataset {s['id']}" in r.stdout
    r = cli("datasets", "show", s["id"])
    assert r.exit_code == 3 and f"no dataset '{s['id']}'" in r.stderr


def test_cli_map_option(cli, write, tailtune_home):
    p = write("m.csv", "time,object\n1,a\n")
    r = cli("ingest", str(p), "--map", "time=ts", "--map", "object=key", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["rows"] == 1
    r = cli("ingest", str(p), "--map", "time")
    assert r.exit_code == 2 and "--map expects COLUMN=FIELD, got 'time'" in r.stderr


def test_progress_reaches_the_file_size(write, settings):
    import gzip

    body = "ts,key\n" + "".join(f"{i},k{i}\n" for i in range(5000))
    p = write("p.csv.gz", gzip.compress(body.encode()))
    seen: list[tuple[int, int]] = []
    ingest_file(p, settings=settings, progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1] == (p.stat().st_size, p.stat().st_size)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
