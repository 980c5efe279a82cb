"""Fixtures of the analysis tests: hand-made and generated canonical traces written as Parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

# The hand-made trace every exact-table test uses (request_id, ts, key, value_size, latency_us):
#   r1 @0.0: a(100) b(200) c(300)    r2 @1.0: a(100)    r3 @2.5: a(100) b(200)    r4 @4.0: d(size unknown)
HAND_ROWS: list[tuple[int, float, str, int | None, float | None]] = [
    (1, 0.0, "a", 100, 100.0),
    (1, 0.0, "b", 200, 300.0),
    (1, 0.0, "c", 300, 600.0),
    (2, 1.0, "a", 100, 200.0),
    (3, 2.5, "a", 100, None),
    (3, 2.5, "b", 200, None),
    (4, 4.0, "d", None, None),
]


def canonical_table(cols: dict[str, Any]) -> pa.Table:
    types = {"request_id": pa.int64(), "ts": pa.float64(), "key": pa.string(), "value_size": pa.int64(),
             "latency_us": pa.float64(), "op": pa.string(), "client_id": pa.string()}
    return pa.table({k: pa.array(v, type=types[k]) for k, v in cols.items()})


@pytest.fixture
def hand_parquet(tmp_path: Path) -> Path:
    cols = {name: [r[i] for r in HAND_ROWS]
            for i, name in enumerate(["request_id", "ts", "key", "value_size", "latency_us"])}
    path = tmp_path / "hand.parquet"
    pq.write_table(canonical_table(cols), path)
    return path


GEN_ALPHA = 0.9
GEN_MU = 1.5
GEN_SIGMA = 0.8
GEN_KEYS = 2000
GEN_REQUESTS = 20000


def generated_trace(seed: int = 7) -> dict[str, Any]:
    """Known parameters: Zipf(α=0.9) over 2000 keys, multiget sizes max(1, round(lognormal(1.5, 0.8)))."""
    rng = np.random.default_rng(seed)
    sizes = np.maximum(1, np.rint(rng.lognormal(GEN_MU, GEN_SIGMA, GEN_REQUESTS))).astype(np.int64)
    rid = np.repeat(np.arange(GEN_REQUESTS, dtype=np.int64), sizes)
    ts = np.repeat(np.sort(rng.uniform(0.0, 60.0, GEN_REQUESTS)), sizes)
    p = np.arange(1, GEN_KEYS + 1, dtype=np.float64) ** -GEN_ALPHA
    ranks = rng.choice(GEN_KEYS, size=rid.size, p=p / p.sum())
    key_size = np.rint(100 * (1 + rng.pareto(1.5, GEN_KEYS))).astype(np.int64)
    return {"request_id": rid, "ts": ts, "key": [f"key{r}" for r in ranks], "value_size": key_size[ranks],
            "sizes": sizes, "ranks": ranks}


@pytest.fixture(scope="session")
def generated_parquet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    g = generated_trace()
    path = tmp_path_factory.mktemp("gen") / "gen.parquet"
    cols = {k: g[k] for k in ("request_id", "ts", "key", "value_size")}
    pq.write_table(canonical_table(cols), path, row_group_size=50_000)
    return path, g
