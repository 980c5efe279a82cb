"""Properties every profile's trace has: ids 0..N-1, one Poisson ts per request, distinct keys per request."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from ingest.generate import PROFILES, generate_table
from tests.generate.helpers import key_ids, request_sizes


@pytest.fixture(scope="module", params=list(PROFILES))
def trace(request: pytest.FixtureRequest) -> tuple[str, pa.Table]:
    name = str(request.param)
    return name, generate_table(name, 4000, 11, rate=250.0)


def test_request_ids_are_contiguous_and_grouped(trace: tuple[str, pa.Table]) -> None:
    _, table = trace
    rid = table.column("request_id").to_numpy()
    assert rid[0] == 0 and rid[-1] == 3999
    assert np.all(np.diff(rid) >= 0) and np.all(np.diff(rid) <= 1)
    assert set(table.column("op").unique().to_pylist()) == {"get"}


def test_one_increasing_timestamp_per_request_at_the_rate(trace: tuple[str, pa.Table]) -> None:
    name, table = trace
    rid = table.column("request_id").to_numpy()
    ts = table.column("ts").to_numpy()
    first = np.flatnonzero(np.r_[True, rid[1:] != rid[:-1]])
    per_request = ts[first]
    assert np.all(np.repeat(per_request, np.diff(np.r_[first, rid.size])) == ts)  # shared within a request
    gaps = np.diff(np.r_[0.0, per_request])
    assert np.all(gaps > 0)
    if name == "diurnal":  # not stationary: its rate is checked against the cycle in test_diurnal.py
        return
    # Exponential gaps with mean 1/250 s: mean within 4 standard errors, coefficient of variation near 1.
    assert abs(gaps.mean() - 1 / 250) < 4 * (1 / 250) / np.sqrt(gaps.size)
    assert 0.9 < gaps.std() / gaps.mean() < 1.1


def test_keys_are_distinct_within_each_request(trace: tuple[str, pa.Table]) -> None:
    _, table = trace
    rid = table.column("request_id").to_numpy()
    packed = rid * (1 << 32) + key_ids(table)
    assert np.unique(packed).size == table.num_rows


def test_each_key_has_one_value_size(trace: tuple[str, pa.Table]) -> None:
    _, table = trace
    keys = key_ids(table)
    sizes = table.column("value_size").to_numpy()
    order = np.argsort(keys, kind="stable")
    k, v = keys[order], sizes[order]
    same_key = k[1:] == k[:-1]
    assert np.all(v[1:][same_key] == v[:-1][same_key])
    assert table.column("value_size").null_count == 0 and v.min() >= 0


def test_measured_sizes_match_the_model(trace: tuple[str, pa.Table]) -> None:
    from ingest.generate import make_profile

    name, table = trace
    sizes = request_sizes(table)
    model = make_profile(name).components.sizes
    pmf = model.pmf()
    sd = np.sqrt(np.dot(pmf, (np.arange(pmf.size) - model.mean()) ** 2))
    assert abs(sizes.mean() - model.mean()) <= 4 * sd / np.sqrt(sizes.size) + 1e-12
    assert sizes.max() <= model.max_size
