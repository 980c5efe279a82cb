"""Fuzzing ingest: generated malformed, truncated and oversized inputs of every format and compression.

Every example must end in one of two ways — a clear BadInputError naming the file, with no dataset and no
staging folder left; or a complete, correct dataset (the exact rows of the input when its content was not
damaged) — never an internal exception, never a partial dataset, and within a memory bound derived from the caps:

* in process (every example): the peak of Python allocations (tracemalloc) stays under `PY_BOUND`, a multiple of
  the decompressed-bytes cap, while the oversized examples decompress to 4–16 times that cap;
* in a subprocess (a few large cases: a 1 GiB zstd bomb, a 512 MiB line, a header of 10^6 columns, a Parquet
  dictionary that expands to 32 GiB, a Meta KV row of op_count 10^12): the growth of the whole process's peak RSS
  (ru_maxrss, Arrow's memory included) stays under `RSS_BOUND`, derived from the block size and the line cap.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from base.errors import BadInputError
from base.settings import Settings, get_settings
from ingest.formats import format_names, reader_class
from ingest.formats.base import BLOCK_BYTES
from ingest.formats.source import detect_compression
from ingest.limits import Limits
from ingest.pipeline import ingest_file
from ingest.store import DatasetStore
from tests.ingest.samples import valid_file

#: Every format of the registry that reads a file: `valid_file` fails for one it cannot write yet. A format that
#: reads a directory (the binary full query log) has no file to damage: its input is tested with a real
#: Cassandra's log (test_cassandra_fql_real.py), its reader's refusals in test_cassandra_fql.py.
FORMATS = tuple(n for n in format_names() if not reader_class(n).reads_directory)
CODECS: dict[str, Callable[[bytes], bytes]] = {
    "none": lambda b: b,
    "gzip": lambda b: gzip.compress(b, 6),
    "bz2": lambda b: bz2.compress(b, 9),
    "xz": lambda b: lzma.compress(b, preset=1),
    "zstd": lambda b: zstandard.ZstdCompressor(write_checksum=True).compress(b),
}

#: Small caps, so that oversized examples stay cheap to generate.
LIMITS = Limits(
    max_decompressed_bytes=4 << 20,
    max_compression_ratio=50,
    max_rows=20_000,
    max_line_bytes=64 << 10,
    max_columns=64,
    ratio_check_after_bytes=256 << 10,
)
#: In-process bound on the peak of Python allocations: a read of one block (BLOCK_BYTES, allocated in full by the
#: buffered reader) and the block joined to the carried line, plus at most the capped input twice over (its split
#: lines, one chunk's Python values) — while the oversized inputs expand to 16 × the decompressed-bytes cap.
PY_BOUND = 2 * BLOCK_BYTES + 2 * LIMITS.max_decompressed_bytes


class Blob(bytes):
    """Input bytes that show as their length and head in a failing example (not hundreds of KB)."""

    def __repr__(self) -> str:
        return f"Blob({len(self):,} bytes: {bytes(self[:48])!r}...)"


@lru_cache(maxsize=64)
def _oversized(fmt: str, kind: str, codec: str) -> bytes:
    """Inputs that expand to 16 × the decompressed-bytes cap (a bomb) or hold one line of 4 × the cap."""
    size = 16 * LIMITS.max_decompressed_bytes
    if kind == "bomb":
        one, _ = valid_file(fmt, [(1, "k", 1)])
        head = {"csv": b"ts,key,value_size\n", "tsv": b"ts\tkey\tvalue_size\n", "meta-kv": one.split(b"\n")[0] + b"\n"}
        line = one[len(head.get(fmt, b"")) :] if fmt != "keys-bin" else bytes(8)
        body = head.get(fmt, b"") + line * (size // max(1, len(line)))
    else:  # one huge line after the first row
        valid, _ = valid_file(fmt, [(1, "a", 1)])
        body = valid + b"x" * (4 * LIMITS.max_decompressed_bytes) + b"\n"
    return CODECS[codec](body)


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    fmt = draw(st.sampled_from(FORMATS))
    codec = "none" if fmt == "parquet" else draw(st.sampled_from(sorted(CODECS)))
    n = draw(st.integers(1, 40))
    key = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=12)
    keys = draw(st.lists(key, min_size=n, max_size=n))
    sizes = draw(st.lists(st.integers(1, 10**6), min_size=n, max_size=n))
    rows = [(i, k, s) for i, (k, s) in enumerate(zip(keys, sizes, strict=True))]
    body, expected = valid_file(fmt, rows)
    mutation = draw(
        st.sampled_from(
            ["none", "truncate", "flip", "insert", "append", "deep-json", "many-columns", "bomb", "long-line"]
        )
    )
    content_intact = True
    if mutation in ("bomb", "long-line"):
        data = _oversized(fmt, mutation, "none" if mutation == "long-line" and codec == "none" else codec)
        if mutation == "long-line" and codec == "none":
            data = data[: LIMITS.max_decompressed_bytes - 1]  # within the size cap: the line cap must catch it
        return {"fmt": fmt, "codec": codec, "data": Blob(data), "mutation": mutation, "expected": None, "explicit": fmt}
    if mutation == "deep-json":
        body = body + b'{"ts": 99, "key": ' + b"[" * 50_000 + b"]" * 50_000 + b"}\n"
        content_intact = False
    elif mutation == "many-columns":
        body = b",".join(b"c%d" % i for i in range(draw(st.integers(65, 5000)))) + b"\n" + body
        content_intact = False
    data = CODECS[codec](body)
    if mutation == "truncate":
        data = data[: draw(st.integers(0, max(0, len(data) - 1)))]
    elif mutation == "flip":
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    elif mutation in ("insert", "append"):
        junk = draw(st.binary(min_size=1, max_size=64))
        at = len(data) if mutation == "append" else draw(st.integers(0, len(data)))
        data = data[:at] + junk + data[at:]
    if mutation in ("truncate", "flip", "insert", "append") and codec == "none":
        content_intact = False  # plain text has no checksum: a damaged file may still be a valid one
    if detect_compression(data[:8]) != codec:
        content_intact = False  # no longer that codec's magic: another file altogether (e.g. keys-bin)
    explicit = draw(st.sampled_from(["auto", fmt]))
    return {
        "fmt": fmt,
        "codec": codec,
        "data": Blob(data),
        "mutation": mutation,
        "expected": expected if content_intact else None,
        "explicit": explicit,
    }


def _leftovers(home: Path) -> list[str]:
    out: list[str] = []
    for sub in ("datasets", "tmp"):
        root = home / sub
        if root.exists():
            out += [str(p.relative_to(home)) for p in root.rglob("*")]
    return out


def _check_dataset(info: Any, case: dict[str, Any]) -> None:
    """A complete, self-consistent dataset; the exact rows when the content was intact."""
    table = info.read_table()
    m = info.manifest
    assert table.num_rows == m["rows"] > 0
    assert len(set(table.column("request_id").to_pylist())) == m["requests"]
    assert [p.name for p in info.parquet_files] == m["parquet_files"]
    assert m["rows"] <= LIMITS.max_rows
    if case["expected"] is not None:
        assert table.column("key").to_pylist() == case["expected"], case["mutation"]
    if case["codec"] != "none" and case["mutation"] == "truncate":
        raise AssertionError("a truncated compressed input must never become a dataset")


@pytest.fixture
def fuzz_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Settings:
    home = tmp_path_factory.mktemp("fuzz-home")
    monkeypatch.setenv("TAILTUNE_HOME", str(home))
    get_settings.cache_clear()
    s = get_settings()
    warm = tmp_path_factory.mktemp("fuzz-warm")
    for fmt in FORMATS:  # first use imports modules (duckdb, Arrow kernels): not part of any example's peak
        body, _ = valid_file(fmt, [(1, "a", 1), (2, "b", 2)])
        path = warm / f"warm.{fmt}"
        path.write_bytes(body)
        info = ingest_file(path, fmt=fmt, settings=s, limits=LIMITS, unsorted="sort")
        DatasetStore(s).delete(info.id)
    return s


@settings(
    max_examples=int(os.environ.get("TAILTUNE_FUZZ_EXAMPLES", "80")),  # more for a deeper run by hand
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(case=cases())
def test_fuzz_ingest(case: dict[str, Any], fuzz_home: Settings, tmp_path: Path) -> None:
    home = fuzz_home.home_dir
    store = DatasetStore(fuzz_home)
    for d in store.list():  # each example starts from an empty store
        store.delete(d.id)
    path = tmp_path / f"in-{case['fmt']}.{case['codec']}"
    path.write_bytes(case["data"])
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        info = ingest_file(path, fmt=case["explicit"], settings=fuzz_home, limits=LIMITS, unsorted="sort")
    except BadInputError as exc:
        peak = tracemalloc.get_traced_memory()[1]
        assert exc.problems and all(p.file == str(path) for p in exc.problems), str(exc)
        assert str(exc).startswith(str(path)), str(exc)
        assert _leftovers(home) == [], "a failed ingest left files behind"
    else:
        peak = tracemalloc.get_traced_memory()[1]
        assert case["mutation"] not in ("bomb", "long-line", "deep-json", "many-columns") or case["fmt"] in (
            "keys-bin",
            "parquet",
        ), f"{case['mutation']} of {case['fmt']} was accepted"
        _check_dataset(info, case)
        assert not (home / "tmp").exists() or not any((home / "tmp").iterdir())
    finally:
        tracemalloc.stop()
    if os.environ.get("TAILTUNE_FUZZ_PEAKS"):
        with open(os.environ["TAILTUNE_FUZZ_PEAKS"], "a") as fh:
            fh.write(f"{peak} {case['fmt']} {case['codec']} {case['mutation']}\n")
    assert peak < PY_BOUND, f"peak Python memory {peak:,} B ≥ {PY_BOUND:,} B ({case['fmt']}, {case['mutation']})"


# --- whole-process memory on large hostile inputs, in a subprocess -------------------------------------------

#: The caps let a hostile input be processed up to about RATIO_CHECK_AFTER_BYTES of decompressed data, one block
#: and one line (the line cap) at a time. The bound on its peak-RSS growth is therefore what a *legitimate* input
#: of that size costs — measured in the test on a keys-bin file of RATIO_CHECK_AFTER_BYTES (the format with the
#: most rows per byte) — with a margin: REFERENCE_MARGIN × that + 64 MiB. Without their caps, the cases below
#: take gigabytes (or, for the bomb, minutes and 134 M rows).
REFERENCE_MARGIN = 1.25

_PROBE = """
import json, resource, sys
from pathlib import Path
from ingest.pipeline import ingest_file
from base.errors import BadInputError
from base.settings import get_settings
def peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
for warm in sys.argv[3:]:
    ingest_file(Path(warm), settings=get_settings())
base = peak()
try:
    ingest_file(Path(sys.argv[1]), fmt=sys.argv[2], settings=get_settings())
    outcome = "ingested"
except BadInputError as exc:
    outcome = str(exc)
print(json.dumps({"base": base, "peak": peak(), "outcome": outcome}))
"""


def _zstd_stream(path: Path, pieces: list[tuple[bytes, int]]) -> Path:
    """Write (chunk, repeat) pieces through a streaming zstd compressor (never the whole content in memory)."""
    with path.open("wb") as fh, zstandard.ZstdCompressor(level=1).stream_writer(fh) as w:
        for chunk, repeat in pieces:
            for _ in range(repeat):
                w.write(chunk)
    return path


def _large_cases(d: Path) -> dict[str, tuple[Path, str, dict[str, str]]]:
    """name → (input, expected message, settings for the case: the cap under test must be the one that trips)."""
    mib = b"\0" * (1 << 20)
    line = b"a" * (1 << 20)
    no_ratio = {"TAILTUNE_INGEST_MAX_COMPRESSION_RATIO": "0"}
    cases = {
        "zstd bomb, 1 GiB of zeros": (_zstd_stream(d / "bomb.zst", [(mib, 1024)]), "compression ratio above 100:1", {}),
        "a 512 MiB line": (
            _zstd_stream(d / "line.csv.zst", [(b"ts,key\n1,a\n2,", 1), (line, 512), (b"\n", 1)]),
            ":3: line longer than 1,048,576 bytes",
            no_ratio,
        ),
        "a header of 10^6 columns": (
            _zstd_stream(d / "cols.csv.zst", [(b"ts,key", 1), (b",c", 1_000_000), (b"\n1,a\n", 1)]),
            ":1: the header has 1,000,002 columns",
            {**no_ratio, "TAILTUNE_INGEST_MAX_LINE_BYTES": str(16 << 20), "PROBE_FORMAT": "csv"},
        ),
        "meta-kv op_count 10^12": (
            _zstd_stream(d / "meta.csv.zst", [(b"key,op,size,op_count\na,GET,1,1\nb,GET,1,1000000000000\n", 1)]),
            ":3: more than 100,000,000 rows",
            {},
        ),
    }
    n = 1 << 16  # one value of 512 KiB, dictionary-encoded, repeated 65,536 times: 32 GiB once materialized
    key = pa.DictionaryArray.from_arrays(pa.array([0] * n, pa.int32()), pa.array(["v" * (512 << 10)]))
    pq_path = d / "dict.parquet"
    pq.write_table(pa.table({"ts": pa.array(range(n), pa.float64()), "key": key}), pq_path)
    cases["Parquet dictionary expanding to 32 GiB"] = (pq_path, "TAILTUNE_INGEST_MAX_DECOMPRESSED_BYTES", {})
    return cases


def _probe(path: Path, warm: list[Path], env: dict[str, str], fmt: str = "auto") -> tuple[int, str]:
    r = subprocess.run(
        [sys.executable, "-c", _PROBE, str(path), fmt, *map(str, warm)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **env},
    )
    assert r.returncode == 0, f"{path.name}: {r.stderr[-2000:]}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return int(out["peak"] - out["base"]), str(out["outcome"])


@pytest.mark.slow
def test_memory_stays_bounded_on_large_hostile_inputs(tmp_path: Path, tailtune_home: Path) -> None:
    import numpy as np

    from ingest.limits import RATIO_CHECK_AFTER_BYTES

    warm_csv = tmp_path / "warm.csv"
    warm_csv.write_bytes(b"ts,key,value_size\n" + b"".join(b"%d,k%d,%d\n" % (i, i, i) for i in range(1000)))
    warm_pq = tmp_path / "warm.parquet"
    pq.write_table(pa.table({"ts": [1.0, 2.0], "key": ["a", "b"]}), warm_pq)
    warm = [warm_csv, warm_pq]
    reference = tmp_path / "reference.bin"
    np.arange(RATIO_CHECK_AFTER_BYTES // 8, dtype=">i8").tofile(reference)
    ref_growth, outcome = _probe(reference, warm, {}, "keys-bin")
    assert outcome == "ingested", outcome
    bound = int(REFERENCE_MARGIN * ref_growth) + (64 << 20)
    print(f"reference: a legitimate {RATIO_CHECK_AFTER_BYTES >> 20} MiB keys-bin file grew {ref_growth >> 20} MiB")
    failures = []
    for name, (path, expected, env) in _large_cases(tmp_path).items():
        growth, outcome = _probe(path, warm, env, env.get("PROBE_FORMAT", "auto"))
        print(f"{name}: peak RSS grew {growth >> 20} MiB (bound {bound >> 20} MiB): {outcome[-120:]}")
        if expected not in outcome or growth > bound:
            failures.append(f"{name}: grew {growth >> 20} MiB (bound {bound >> 20}); {outcome}")
    assert not failures, "\n".join(failures)
