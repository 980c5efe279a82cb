"""Fits recover the parameters of generated samples within stated tolerances (fixed seeds)."""

from __future__ import annotations

import numpy as np
import pytest

from analysis import fits


def _count_of_counts(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    cnt = np.bincount(samples)
    cnt = cnt[cnt > 0]
    u, k = np.unique(cnt, return_counts=True)
    return u.astype(np.int64), k.astype(np.int64)


@pytest.mark.parametrize("alpha", [0.7, 0.9, 1.2])
def test_zipf_recovered(alpha: float) -> None:
    rng = np.random.default_rng(3)
    n = 5000
    p = np.arange(1, n + 1, dtype=np.float64) ** -alpha
    counts, keys = _count_of_counts(rng.choice(n, size=400_000, p=p / p.sum()))
    mle = fits.zipf_mle(counts, keys)
    ols = fits.zipf_ols(counts, keys)
    assert mle is not None and ols is not None
    assert mle.alpha == pytest.approx(alpha, abs=0.03)  # stated tolerance: MLE ±0.03
    assert ols.alpha == pytest.approx(alpha, abs=0.1)  # OLS is biased by the sampled tail: ±0.1
    assert ols.rank_min == 1 and ols.rank_max == int(keys.sum())


def test_zipf_degenerate_is_none() -> None:
    one = np.array([5], dtype=np.int64), np.array([1], dtype=np.int64)
    assert fits.zipf_ols(*one) is None
    assert fits.zipf_mle(*one) is None


def test_zipf_ols_exact_on_a_perfect_power_law() -> None:
    # frequencies 1000 / r^1 for r = 1..4 → 1000, 500, 333, 250 — slope exactly -1 up to rounding
    counts = np.array([1000, 500, 333, 250], dtype=np.int64)
    ols = fits.zipf_ols(counts, np.ones(4, dtype=np.int64))
    assert ols is not None
    assert ols.alpha == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("n,alpha", [(10, 0.8), (5000, 1.0), (3_000_000, 0.9), (3_000_000, 1.3)])
def test_harmonic_matches_direct_sum(n: int, alpha: float) -> None:
    direct = float(np.sum(np.arange(1, n + 1, dtype=np.float64) ** -alpha))
    assert fits.harmonic(n, alpha) == pytest.approx(direct, rel=1e-10)


def test_lognormal_multi_recovered() -> None:
    rng = np.random.default_rng(5)
    x = np.maximum(1, np.rint(rng.lognormal(2.0, 1.0, 100_000))).astype(np.int64)
    sizes, reqs = np.unique(x, return_counts=True)
    fit = fits.lognormal_multi(sizes, reqs.astype(np.int64))
    assert fit is not None
    assert fit.mu == pytest.approx(2.0, abs=0.03)  # stated tolerance ±0.03
    assert fit.sigma == pytest.approx(1.0, abs=0.03)
    assert fit.ks < 0.01
    assert fit.n == int(reqs[sizes >= 2].sum())


def _power_law_sizes(seed: int, n: int = 20_000) -> tuple[np.ndarray, np.ndarray]:
    """The `soundcloud` profile's sizes: 40% multi-key, P(k) ∝ k^-a on 2..2000 with the mean 8.6 (a ≈ 1.797)."""
    from ingest.profiles.sizes import SinglesPlusPowerLawSizes

    x = SinglesPlusPowerLawSizes(8.6, 0.4, 2000).draw(np.random.default_rng(seed), n)
    sizes, reqs = np.unique(x, return_counts=True)
    return sizes.astype(np.int64), reqs.astype(np.int64)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_power_law_sizes_recovered_and_preferred_to_a_degenerate_lognormal(seed: int) -> None:
    from ingest.profiles.sizes import SinglesPlusPowerLawSizes

    sizes, reqs = _power_law_sizes(seed)
    pl = fits.power_law_multi(sizes, reqs)
    ln = fits.lognormal_multi(sizes, reqs)
    assert pl is not None and ln is not None
    assert pl.alpha == pytest.approx(SinglesPlusPowerLawSizes(8.6, 0.4, 2000).exponent, abs=0.05)  # ±0.05 (8k)
    assert pl.ks < 0.02 and pl.max_size == int(sizes.max()) and pl.n == int(reqs[sizes >= 2].sum())
    # the lognormal's best fit runs off along its ridge (μ far below 0, σ large): a straight line over 2..2000
    assert ln.mu < -5 and ln.sigma > 3
    assert fits.size_model(ln, pl) == "power_law"


def test_lognormal_sizes_prefer_the_lognormal() -> None:
    rng = np.random.default_rng(5)
    x = np.maximum(1, np.rint(rng.lognormal(1.5, 0.8, 20_000))).astype(np.int64)
    sizes, reqs = np.unique(x, return_counts=True)
    ln, pl = fits.lognormal_multi(sizes, reqs), fits.power_law_multi(sizes, reqs)
    assert ln is not None and pl is not None and ln.loglik > pl.loglik + 100
    assert fits.size_model(ln, pl) == "lognormal"


def test_power_law_ccdf_matches_the_direct_sum() -> None:
    k = np.arange(2, 51, dtype=np.float64)
    p = k**-1.5
    direct = 1.0 - (np.cumsum(p) - p) / p.sum()  # P(K >= k)
    assert fits.power_law_ccdf(k, 1.5, 50) == pytest.approx(direct, rel=1e-9)
    ln = fits.lognormal_multi_ccdf(np.array([2.0, 3.0]), 1.0, 0.5)
    assert ln[0] == pytest.approx(1.0) and 0 < ln[1] < 1


def test_lognormal_single_key_only_is_none() -> None:
    assert fits.lognormal_multi(np.array([1]), np.array([10])) is None


def test_gpd_recovered_from_lomax_tail() -> None:
    rng = np.random.default_rng(11)
    v = 1000.0 * (1 + rng.pareto(2.0, 200_000))  # Lomax(2): exceedances are GPD with ξ = 0.5
    fit = fits.gpd_tail(v, float(np.quantile(v, 0.9)))
    assert fit is not None
    assert fit.xi == pytest.approx(0.5, abs=0.06)  # stated tolerance ±0.06
    assert fit.n == int((v > np.quantile(v, 0.9)).sum())


def test_gpd_too_few_exceedances_is_none() -> None:
    assert fits.gpd_tail(np.arange(100, dtype=np.float64), 95.0) is None


def test_fit_range_skips_the_sampling_plateau_of_a_sparse_trace() -> None:
    # Zipf(0.8) over 1 M keys, 200 k accesses: most keys are seen once or twice (the plateau of Rein Fig 3b).
    rng = np.random.default_rng(11)
    alpha, n = 0.8, 1_000_000
    p = np.arange(1, n + 1, dtype=np.float64) ** -alpha
    counts, keys = _count_of_counts(rng.choice(n, size=200_000, p=p / p.sum()))
    rank_max = fits.fit_rank_max(counts, keys)
    assert rank_max == int(keys[counts >= 5].sum()) < int(keys.sum())
    full = fits.zipf_mle(counts, keys)
    ranged = fits.zipf_mle(counts, keys, rank_max)
    ols = fits.zipf_ols(counts, keys, rank_max)
    assert full is not None and ranged is not None and ols is not None
    assert ranged.rank_max == rank_max and ols.rank_max == rank_max
    assert abs(full.alpha - alpha) > 0.1  # through the plateau the estimate is far off
    assert ranged.alpha == pytest.approx(alpha, abs=0.05)
    assert abs(ranged.alpha - alpha) < abs(full.alpha - alpha) / 3
    assert ols.alpha == pytest.approx(alpha, abs=0.1)


def test_fit_range_uses_every_rank_when_few_are_well_sampled() -> None:
    counts = np.array([7, 2, 1], dtype=np.int64)
    keys = np.array([3, 10, 50], dtype=np.int64)
    assert fits.fit_rank_max(counts, keys) == 63  # only 3 ranks have count >= 5 (< 10): use all
    assert fits.fit_rank_max(counts, keys, min_count=2, min_ranks=10) == 13
