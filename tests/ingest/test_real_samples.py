"""Every real sample in ../shared/data: the right format sniffed, and counts checked against the raw files."""

from __future__ import annotations

import bz2
import csv
import lzma

import pytest

from ingest.pipeline import ingest_file
from ingest.sniff import sniff

SAMPLES = {
    "cachelib_meta_kv_202401_fixture_1.csv": ("meta-kv", "none"),
    "cachelib_meta_kv_202401_fixture_2.csv": ("meta-kv", "none"),
    "cachelib_twitter_sample.csv": ("twitter", "none"),
    "caffeine_scarab-recs.trace.xz": ("keys-bin", "xz"),
    "caffeine_tencent_cloud_photos-sample.bz2": ("tencent-photo", "bz2"),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_sniffed(shared_data, name):
    s = sniff(shared_data / name)
    assert (s.format, s.compression) == SAMPLES[name]


@pytest.mark.parametrize("name", ["cachelib_meta_kv_202401_fixture_1.csv", "cachelib_meta_kv_202401_fixture_2.csv"])
def test_meta_kv_fixture(shared_data, settings, name):
    with (shared_data / name).open() as fh:
        recs = list(csv.DictReader(fh))
    info = ingest_file(shared_data / name, settings=settings)
    m = info.manifest
    assert m["source"]["layout"] == "202401"
    assert m["rows"] == sum(int(r["op_count"]) for r in recs)
    assert m["distinct_keys"] == len({r["key"] for r in recs})
    times = [float(r["op_time"]) for r in recs]
    assert (m["ts_min"], m["ts_max"]) == (min(times), max(times))
    known = info.read_table(["value_size"]).column("value_size").null_count
    assert known == sum(int(r["op_count"]) for r in recs if int(r["size"]) == 0)


def test_twitter_sample(shared_data, settings):
    lines = (shared_data / "cachelib_twitter_sample.csv").read_text().splitlines()
    info = ingest_file(shared_data / "cachelib_twitter_sample.csv", settings=settings)
    t = info.read_table()
    assert t.num_rows == len(lines) == 100
    assert t.column("key").to_pylist() == [ln.split(",")[1] for ln in lines]
    assert t.column("value_size").to_pylist() == [int(ln.split(",")[3]) for ln in lines]
    assert info.manifest["requests"] == 100


def test_tencent_sample(shared_data, settings):
    raw = bz2.decompress((shared_data / "caffeine_tencent_cloud_photos-sample.bz2").read_bytes()).decode()
    fields = [ln.split(" ") for ln in raw.splitlines()]
    info = ingest_file(shared_data / "caffeine_tencent_cloud_photos-sample.bz2", settings=settings)
    m = info.manifest
    assert m["rows"] == len(fields) == 10_000
    assert m["distinct_keys"] == len({(f[1], f[2]) for f in fields})
    assert m["has_latency"] and m["has_value_size"]
    t = info.read_table(["value_size", "latency_us"])
    assert sum(t.column("value_size").to_pylist()) == sum(int(f[4]) for f in fields)
    assert sum(t.column("latency_us").to_pylist()) == 1000.0 * sum(int(f[7]) for f in fields)


@pytest.mark.slow
def test_scarab_keys(shared_data, settings):
    data = lzma.decompress((shared_data / "caffeine_scarab-recs.trace.xz").read_bytes())
    info = ingest_file(shared_data / "caffeine_scarab-recs.trace.xz", settings=settings)
    m = info.manifest
    assert m["rows"] == len(data) // 8 == 1_245_184
    assert m["distinct_keys"] == 258_368
    assert m["ts_max"] == pytest.approx((1_245_184 - 1) / 1000.0)
    first = int.from_bytes(data[:8], "big", signed=True)
    assert info.parquet_files and info.read_table(["key"]).column("key")[0].as_py() == str(first)
