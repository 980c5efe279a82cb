"""Each profile's defining properties, measured on generated traces and compared with its published source."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from ingest.generate import generate_table, make_profile
from ingest.profiles.values import ETC_GPD_SCALE, ETC_GPD_SHAPE, ETC_HEAD, BimodalValueSizes, EtcValueSizes
from tests.generate.helpers import key_ids, request_sizes


# ---------------------------------------- soundcloud
def test_soundcloud_done_when(cli: Callable[..., Any]) -> None:
    """`generate --profile soundcloud --requests 200000 --seed 1`: 8.6 ± 0.3, 0.40 ± 0.02, ≤ 2000."""
    result = cli("generate", "--profile", "soundcloud", "--requests", "200000", "--seed", "1", "--json")
    assert result.exit_code == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["requests"] == 200_000
    assert abs(stats["mean_size"] - 8.6) <= 0.3
    assert abs(stats["multi_key_fraction"] - 0.40) <= 0.02
    assert stats["max_size"] <= 2000
    assert stats["max_size"] > 1000  # the heavy tail reaches far (P(size ≥ 1000) ≈ 4e-3 per request)
    assert stats["rows"] == round(stats["mean_size"] * stats["requests"])


def test_soundcloud_model_is_solved_exactly() -> None:
    model = make_profile("soundcloud").components.sizes
    assert model.mean() == pytest.approx(8.6, abs=1e-9)
    assert model.multi_fraction() == pytest.approx(0.40, abs=1e-12)
    assert model.pmf()[1] == pytest.approx(0.60, abs=1e-12)
    # Chisel §II: the SoundCloud 99th percentile is "around 100 keys".
    p99 = int(np.searchsorted(np.cumsum(model.pmf()), 0.99))
    assert 80 <= p99 <= 160
    other = make_profile("soundcloud", {"mean_size": "5", "multi_fraction": "0.3", "max_size": "500"})
    assert other.components.sizes.mean() == pytest.approx(5.0, abs=1e-9)


@pytest.fixture(scope="module")
def soundcloud_1m() -> pa.Table:
    """~1 M key accesses, the size of trace Rein's Fig. 3b describes."""
    return generate_table("soundcloud", 116_000, 2)


def test_soundcloud_key_popularity_is_heavy_tailed_but_mostly_unique(soundcloud_1m: pa.Table) -> None:
    keys = key_ids(soundcloud_1m)
    assert 0.9e6 < keys.size < 1.1e6
    _, counts = np.unique(keys, return_counts=True)
    assert np.mean(counts == 1) > 0.5  # "most keys are accessed just once"
    assert 500 <= counts.max() <= 2000  # "a few keys are accessed up to 1000 times"
    assert counts.max() / np.median(counts) >= 300  # heavy tail: orders of magnitude above the typical key


def test_soundcloud_does_not_overload_one_of_128_servers(soundcloud_1m: pa.Table) -> None:
    # Hash keys onto 128 servers (as the simulator would): the hottest server stays close to the average.
    keys = key_ids(soundcloud_1m).astype(np.uint64)
    server = ((keys * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(57)).astype(np.int64)
    load = np.bincount(server, minlength=128)
    assert load.max() / load.mean() < 1.3
    assert np.all(soundcloud_1m.column("value_size").to_numpy() == 1000)  # fixed-size values


# ---------------------------------------- facebook
@pytest.fixture(scope="module")
def facebook() -> pa.Table:
    return generate_table("facebook", 50_000, 7)


def test_facebook_lognormal_parameters_are_recovered(facebook: pa.Table) -> None:
    from scipy import optimize, stats

    sizes = request_sizes(facebook)
    ks, counts = np.unique(sizes, return_counts=True)
    lo = np.where(ks == 1, -np.inf, np.log(ks - 0.5))
    hi = np.log(ks + 0.5)

    def nll(p: np.ndarray) -> float:  # rounded lognormal: size k means X in [k - 0.5, k + 0.5)
        mu, sigma = p
        prob = stats.norm.cdf((hi - mu) / sigma) - stats.norm.cdf((lo - mu) / sigma)
        return float(-(counts * np.log(np.maximum(prob, 1e-300))).sum())

    mu, sigma = optimize.minimize(nll, [2.0, 1.0], method="Nelder-Mead").x
    assert mu == pytest.approx(2.5, abs=0.03)
    assert sigma == pytest.approx(1.25, abs=0.03)
    assert sizes.min() >= 1


def test_facebook_keys_follow_zipf_099(facebook: pa.Table) -> None:
    counts = np.bincount(key_ids(facebook), minlength=100_000)
    ranks = np.arange(50, 2001)  # beyond the head that distinct-keys-per-request flattens (docs/profiles.md)
    slope = np.polyfit(np.log(ranks + 1), np.log(counts[ranks]), 1)[0]
    assert slope == pytest.approx(-0.99, abs=0.05)
    assert counts[0] > counts[1] > counts[10] > counts[1000]


def test_etc_value_sizes_head_and_tail() -> None:
    from scipy import stats

    n = 400_000
    sizes = EtcValueSizes()(np.arange(n, dtype=np.int64))
    head = np.bincount(sizes[sizes < 15], minlength=15) / n
    expected = np.array(ETC_HEAD)
    assert np.all(np.abs(head - expected) <= 4 * np.sqrt(expected * (1 - expected) / n) + 1e-6)
    tail = sizes[sizes >= 15]
    assert tail.size / n == pytest.approx(1 - sum(ETC_HEAD), abs=4 * np.sqrt(0.25 / n))
    # floor(15 + X), X ~ GPD(σ, ξ): fit X on the bin centres of a subsample.
    shape, _, scale = stats.genpareto.fit(tail[:50_000] - 15 + 0.5, floc=0)
    assert shape == pytest.approx(ETC_GPD_SHAPE, abs=0.03)
    assert scale == pytest.approx(ETC_GPD_SCALE, rel=0.05)


def test_facebook_trace_values_are_etc(facebook: pa.Table) -> None:
    keys = key_ids(facebook)
    assert np.array_equal(facebook.column("value_size").to_numpy(), EtcValueSizes()(keys))


# ---------------------------------------- constant50
def test_constant50_every_request_has_50_uniform_keys() -> None:
    table = generate_table("constant50", 20_000, 3)
    assert np.all(request_sizes(table) == 50)
    counts = np.bincount(key_ids(table), minlength=100_000)
    assert counts.size == 100_000
    # 1 M draws over 100 k keys: Poisson(10) per key if uniform — a Zipf head would show up in the maximum.
    assert counts.mean() == 10.0
    assert counts.max() <= 35 and abs(counts.var() - 10.0) < 0.5
    assert make_profile("constant50", {"size": 7}).expected()["mean_size"] == 7.0


# ---------------------------------------- bimodal
def test_bimodal_large_share_and_key_size_consistency() -> None:
    profile = make_profile("bimodal")
    table = generate_table(profile, 100_000, 4)
    values = profile.components.values
    assert isinstance(values, BimodalValueSizes)
    assert set(np.unique(table.column("value_size").to_numpy()).tolist()) == {1024, 512 * 1024}
    assert np.all(request_sizes(table) == 1)  # Héron: single-key reads
    expected = profile.expected()
    assert (expected["mean_size"], expected["max_size"]) == (1.0, 1.0)
    assert expected["large_key_share"] == pytest.approx(0.10, abs=4 * np.sqrt(0.09 / 100_000))
    keys = key_ids(table)
    large = table.column("value_size").to_numpy() == 512 * 1024
    assert np.array_equal(large, values.is_large(keys))
    distinct = np.unique(keys)
    assert values.is_large(distinct).mean() == pytest.approx(0.10, abs=4 * np.sqrt(0.09 / distinct.size))
    # Access share: hashing is independent of popularity, so it matches the model's Zipf-weighted share.
    se = np.sqrt(expected["large_access_share"] * (1 - expected["large_access_share"]) / large.size)
    assert large.mean() == pytest.approx(expected["large_access_share"], abs=4 * se)


def test_bimodal_options_and_tailx_multigets() -> None:
    table = generate_table(
        "bimodal", 20_000, 5, large_size=2 << 20, large_fraction=0.2, keys=5, long_keys=100, long_fraction=0.2
    )
    assert set(np.unique(table.column("value_size").to_numpy()).tolist()) == {1024, 2 << 20}
    sizes = request_sizes(table)
    assert set(np.unique(sizes).tolist()) == {5, 100}
    assert np.mean(sizes == 100) == pytest.approx(0.2, abs=4 * np.sqrt(0.16 / sizes.size))
    # A key's size depends on the key and the options, not on the seed or the request: same key, same size.
    other = generate_table("bimodal", 20_000, 99, large_size=2 << 20, large_fraction=0.2)
    both = np.intersect1d(key_ids(table), key_ids(other))
    assert both.size > 1000
    lookup = dict(zip(key_ids(other).tolist(), other.column("value_size").to_pylist(), strict=True))
    mine = dict(zip(key_ids(table).tolist(), table.column("value_size").to_pylist(), strict=True))
    assert all(lookup[k] == mine[k] for k in both.tolist())


# ---------------------------------------- mice-elephant
@pytest.mark.parametrize(
    ("options", "mice", "elephant_share"),
    [
        ({}, 5, 1 / 10),
        ({"mix": "5:1"}, 5, 1 / 6),
        ({"mice": "1", "mix": "9:1"}, 1, 1 / 10),
        ({"mice": 10}, 10, 0.1),
    ],
)
def test_mice_elephant_mix_and_sizes(options: dict[str, object], mice: int, elephant_share: float) -> None:
    table = generate_table(make_profile("mice-elephant", options), 30_000, 8)
    sizes = request_sizes(table)
    assert set(np.unique(sizes).tolist()) == {mice, 100}
    share = float(np.mean(sizes == 100))
    assert share == pytest.approx(elephant_share, abs=4 * np.sqrt(elephant_share * (1 - elephant_share) / 30_000))
    assert np.all(table.column("value_size").to_numpy() == 1000)
