"""`diurnal`: the arrival rate follows the daily cycle, bursts are where the seed puts them, hot keys drift;
everything is deterministic per seed and independent of the batch size."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pytest

from base.errors import BadInputError
from ingest.generate import BLOCK_REQUESTS, generate_table, make_profile
from ingest.profiles.timing import CyclicArrivals, KeyDrift
from tests.generate.helpers import key_ids, request_sizes


def _request_ts(table: pa.Table) -> npt.NDArray[np.float64]:
    rid = table.column("request_id").to_numpy()
    first = np.r_[True, rid[1:] != rid[:-1]]
    return np.asarray(table.column("ts").to_numpy()[first], dtype=np.float64)


def test_rate_follows_the_cycle() -> None:
    # 3 cycles of 20 s at a mean 1000 req/s, no bursts: counts per 1 s bin track 1 - 0.5 cos(2πt/20).
    table = generate_table("diurnal", 60_000, 3, period_s=20.0, amplitude=0.5, bursts=0.0, drift_s=0.0)
    ts = _request_ts(table)
    assert np.all(np.diff(ts) >= 0)
    assert ts[-1] == pytest.approx(60.0, rel=0.03)  # long-run mean rate is --rate
    counts, edges = np.histogram(ts, bins=np.arange(0.0, 59.0, 1.0))
    mid = (edges[:-1] + 0.5) % 20.0
    model = 1000.0 * (1.0 - 0.5 * np.cos(2.0 * np.pi * mid / 20.0))
    assert np.corrcoef(counts, model)[0, 1] > 0.98
    trough = counts[(mid < 2.0) | (mid > 18.0)].mean()
    peak = counts[np.abs(mid - 10.0) < 2.0].mean()
    assert peak / trough == pytest.approx(1.44 / 0.56, rel=0.1)  # the bins' mean intensity, not 1.5/0.5


def test_bursts_multiply_the_rate_in_seeded_slots() -> None:
    table = generate_table("diurnal", 100_000, 5, drift_s=0.0, period_s=100.0, amplitude=0.0, bursts=10.0,
                           burst_s=2.0, burst_factor=4.0)  # fmt: skip
    ts = _request_ts(table)
    model = CyclicArrivals(100.0, 0.0, 10.0, 2.0, 4.0)
    slots = np.arange(int(ts[-1] // 2.0), dtype=np.int64)
    burst = model.in_burst(slots, 5)
    assert 0.1 < burst.mean() < 0.3  # p = 10 · 2 / 100 = 0.2 of the time
    counts = np.bincount((ts // 2.0).astype(np.int64), minlength=slots.size)[: slots.size]
    ratio = counts[burst].mean() / counts[~burst].mean()
    assert ratio == pytest.approx(4.0, rel=0.05)
    other = CyclicArrivals(100.0, 0.0, 10.0, 2.0, 4.0).in_burst(slots, 6)
    assert not np.array_equal(burst, other)  # another seed, other bursts


def test_hot_keys_drift_by_epoch() -> None:
    table = generate_table("diurnal", 20_000, 2, zipf_alpha=1.2, key_space=10_000, max_size=50, mean_size=3.0,
                           period_s=20.0, bursts=0.0, drift_s=5.0)  # fmt: skip
    keys = key_ids(table)
    row_ts = table.column("ts").to_numpy()
    epochs = np.floor(row_ts / 5.0).astype(np.int64)
    drift = KeyDrift(5.0, 10_000)
    hottest = [int(np.bincount(keys[epochs == e]).argmax()) for e in range(3)]
    assert hottest == drift.shifts(np.arange(3, dtype=np.int64), 2).tolist()  # rank 0 is the hottest key
    assert len(set(hottest)) == 3


def test_keys_stay_distinct_within_requests() -> None:
    table = generate_table("diurnal", 5_000, 4, key_space=3_000, max_size=2000, drift_s=1.0)
    pairs = table.column("request_id").to_numpy().astype(np.int64) * 10_000 + key_ids(table)
    assert np.unique(pairs).size == pairs.size
    assert request_sizes(table).sum() == table.num_rows


def test_deterministic_per_seed_and_independent_of_batch_size() -> None:
    n = BLOCK_REQUESTS + 999
    a = generate_table("diurnal", n, 7, batch_requests=100_000)
    b = generate_table("diurnal", n, 7, batch_requests=4_321)
    c = generate_table("diurnal", n, 8)
    assert a.equals(b)
    assert not a.column("ts").equals(c.column("ts"))


def test_stationary_profiles_keep_poisson_arrivals() -> None:
    ts = _request_ts(generate_table("soundcloud", 20_000, 1, rate=500.0))
    gaps = np.diff(np.r_[0.0, ts])
    assert gaps.mean() == pytest.approx(1 / 500.0, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.05)  # exponential: cv 1


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"amplitude": "1"}, "amplitude"),
        ({"period_s": "0"}, "period_s"),
        ({"burst_factor": "0.5"}, "burst_factor"),
        ({"bursts": "200", "burst_s": "10"}, "bursts"),
        ({"drift_s": "-1"}, "drift_s"),
    ],
)
def test_bad_options_name_the_field(options: dict[str, str], field: str) -> None:
    with pytest.raises(BadInputError) as err:
        make_profile("diurnal", options)
    assert f"field '{field}'" in str(err.value)
