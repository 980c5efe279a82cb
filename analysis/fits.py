"""Distribution fits on small, already-aggregated tables (numpy/scipy on the driver; Spark did the counting).

- Zipf from key access counts given as a *count-of-counts* table (`count` → keys with that count):
  `zipf_ols` (libCacheSim's rank-frequency least-squares slope, all ranks) and `zipf_mle` (maximum
  likelihood of P(rank r) ∝ r^-α over ranks 1..N).
- Multiget sizes: `lognormal_multi` — maximum likelihood of a *discretized, truncated* lognormal for the
  multi-key part (sizes >= 2): P(k) = [Φ((ln(k+½)-μ)/σ) - Φ((ln(k-½)-μ)/σ)] / [1 - Φ((ln 1.5-μ)/σ)], with
  the KS distance as goodness of fit; `power_law_multi` — maximum likelihood of a discrete power law
  P(k) ∝ k^-α on 2..K (K = the largest size seen); `size_model` picks the one the data support (the lognormal
  only when its second parameter buys a significant likelihood gain).
- Value sizes: `gpd_tail` — generalized Pareto fit of the exceedances over a threshold (scipy, location
  fixed at 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import optimize, special, stats

__all__ = [
    "GpdFit",
    "LognormalFit",
    "PowerLawFit",
    "ZipfFit",
    "fit_rank_max",
    "gpd_tail",
    "harmonic",
    "lognormal_multi",
    "lognormal_multi_ccdf",
    "power_law_ccdf",
    "power_law_multi",
    "size_model",
    "sorted_frequencies",
    "zipf_mle",
    "zipf_ols",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class ZipfFit:
    alpha: float
    rank_min: int
    rank_max: int
    r2: float | None  # OLS only: coefficient of determination of the log-log line
    intercept: float | None  # OLS only: ln(frequency) at rank 1 of the fitted line


@dataclass(frozen=True, slots=True)
class LognormalFit:
    mu: float
    sigma: float
    ks: float  # max |empirical CDF - fitted CDF| over the observed support (k >= 2)
    n: int  # multi-key requests fitted
    loglik: float  # log-likelihood of the fitted requests (natural log)


@dataclass(frozen=True, slots=True)
class PowerLawFit:
    alpha: float  # P(k) ∝ k^-alpha on min_size..max_size
    min_size: int
    max_size: int  # the largest size seen (the maximum-likelihood upper bound)
    ks: float  # max |empirical CDF - fitted CDF| over the observed sizes
    n: int  # multi-key requests fitted
    loglik: float  # log-likelihood of the fitted requests (natural log)


@dataclass(frozen=True, slots=True)
class GpdFit:
    xi: float  # shape
    sigma: float  # scale (bytes)
    threshold: float  # exceedances are value - threshold for values > threshold
    n: int
    ks: float


def sorted_frequencies(counts: IntArray, keys: IntArray) -> FloatArray:
    """Expand a count-of-counts table into the rank-ordered frequency vector (rank 1 = most accessed)."""
    order = np.argsort(-counts, kind="stable")
    return np.repeat(counts[order].astype(np.float64), keys[order])


def fit_rank_max(counts: IntArray, keys: IntArray, *, min_count: int = 5, min_ranks: int = 10) -> int:
    """The fitting range 1..rank_max: the ranks whose keys were accessed at least `min_count` times.

    In a sampled trace most keys are seen once or twice, so the low-count plateau (rank-frequency "steps") is
    sampling noise, not popularity: fitting through it flattens α badly. When fewer than `min_ranks` ranks are
    that well sampled, every rank is used.
    """
    well = int(keys[counts >= min_count].sum())
    return well if well >= min_ranks else int(keys.sum())


def zipf_ols(counts: IntArray, keys: IntArray, rank_max: int | None = None) -> ZipfFit | None:
    """libCacheSim's estimate: α = -slope of ln(frequency) on ln(rank) by least squares over ranks 1..rank_max
    (all ranks when None)."""
    freq = sorted_frequencies(counts, keys)
    if rank_max is not None:
        freq = freq[:rank_max]
    if freq.size < 2:
        return None
    x = np.log(np.arange(1, freq.size + 1, dtype=np.float64))
    y = np.log(freq)
    res = stats.linregress(x, y)
    return ZipfFit(
        alpha=float(-res.slope),
        rank_min=1,
        rank_max=int(freq.size),
        r2=float(res.rvalue**2) if np.isfinite(res.rvalue) else None,
        intercept=float(res.intercept),
    )


def harmonic(n: int, alpha: float) -> float:
    """Generalized harmonic number H(n, α) = Σ_{r=1..n} r^-α (exact head, Euler–Maclaurin tail; rel. err <
    1e-12)."""
    head = min(n, 2000)
    s = float(np.sum(np.arange(1, head + 1, dtype=np.float64) ** -alpha))
    if n <= head:
        return s
    m, big = float(head + 1), float(n)
    if abs(alpha - 1.0) < 1e-12:
        integral = math.log(big / m)
    else:
        integral = (big ** (1 - alpha) - m ** (1 - alpha)) / (1 - alpha)
    ends = (m**-alpha + big**-alpha) / 2
    d1 = alpha / 12 * (m ** (-alpha - 1) - big ** (-alpha - 1))
    d3 = -alpha * (alpha + 1) * (alpha + 2) / 720 * (m ** (-alpha - 3) - big ** (-alpha - 3))
    return float(s + integral + ends + d1 + d3)


def zipf_mle(counts: IntArray, keys: IntArray, rank_max: int | None = None) -> ZipfFit | None:
    """Maximum likelihood α of P(rank r) = r^-α / H(N, α), r = 1..N, from the observed rank of every access;
    with `rank_max`, of the accesses to ranks 1..rank_max under the truncated law (N = rank_max).

    The log-likelihood needs only Σ_accesses ln(rank): a group of `keys` keys with equal `count` occupies
    consecutive ranks r0..r1, contributing count · (lnΓ(r1+1) - lnΓ(r0)).
    """
    order = np.argsort(-counts, kind="stable")
    c = counts[order].astype(np.float64)
    k = keys[order].astype(np.float64)
    if rank_max is not None:
        room = np.clip(rank_max - (np.cumsum(k) - k), 0, None)
        k = np.minimum(k, room)
        c, k = c[k > 0], k[k > 0]
    n_keys = int(k.sum())
    if n_keys < 2:
        return None
    r1 = np.cumsum(k)
    r0 = r1 - k + 1
    sum_ln_rank = float(np.sum(c * (special.gammaln(r1 + 1) - special.gammaln(r0))))
    m = float(np.sum(c * k))

    def nll(alpha: float) -> float:
        return alpha * sum_ln_rank + m * math.log(harmonic(n_keys, alpha))

    res = optimize.minimize_scalar(nll, bounds=(1e-6, 6.0), method="bounded", options={"xatol": 1e-7})
    return ZipfFit(alpha=float(res.x), rank_min=1, rank_max=n_keys, r2=None, intercept=None)


def _discrete_lognormal_cdf(k: FloatArray, mu: float, sigma: float) -> FloatArray:
    """P(size <= k | size >= 2) of the discretized lognormal truncated below 1.5."""
    lo = stats.norm.cdf((math.log(1.5) - mu) / sigma)
    hi = stats.norm.cdf((np.log(k + 0.5) - mu) / sigma)
    return np.asarray((hi - lo) / max(1.0 - lo, 1e-300), dtype=np.float64)


def lognormal_multi_ccdf(k: FloatArray, mu: float, sigma: float) -> FloatArray:
    """P(size >= k | size >= 2) of the fitted discretized, truncated lognormal, for integer k >= 2."""
    return np.asarray(1.0 - _discrete_lognormal_cdf(np.asarray(k, dtype=np.float64) - 1.0, mu, sigma),
                      dtype=np.float64)


def _multi_part(sizes: IntArray, requests: IntArray) -> tuple[FloatArray, FloatArray, int] | None:
    """The multi-key part (sizes ≥ 2) of a multiget-size histogram: sizes, weights, requests; None when fewer than
    two sizes or requests are left to fit."""
    mask = sizes >= 2
    s = sizes[mask].astype(np.float64)
    w = requests[mask].astype(np.float64)
    n = int(w.sum())
    if s.size < 2 or n < 2:
        return None
    return s, w, n


def lognormal_multi(sizes: IntArray, requests: IntArray) -> LognormalFit | None:
    """MLE (μ, σ) of the multi-key part of a multiget-size histogram (`sizes` → number of `requests`)."""
    part = _multi_part(sizes, requests)
    if part is None:
        return None
    s, w, n = part
    ln_hi = np.log(s + 0.5)
    ln_lo = np.log(s - 0.5)
    ln_trunc = math.log(1.5)

    def nll(theta: FloatArray) -> float:
        mu, log_sigma = float(theta[0]), float(theta[1])
        sigma = math.exp(log_sigma)
        p = special.ndtr((ln_hi - mu) / sigma) - special.ndtr((ln_lo - mu) / sigma)
        tail = 1.0 - float(special.ndtr((ln_trunc - mu) / sigma))
        return float(-np.sum(w * np.log(np.maximum(p, 1e-300))) + n * math.log(max(tail, 1e-300)))

    ln_s = np.log(s)
    mu0 = float(np.average(ln_s, weights=w))
    sd0 = float(np.sqrt(np.average((ln_s - mu0) ** 2, weights=w))) or 0.5
    res = optimize.minimize(nll, np.array([mu0, math.log(sd0)]), method="Nelder-Mead",
                            options={"xatol": 1e-7, "fatol": 1e-9, "maxiter": 4000})
    mu, sigma = float(res.x[0]), float(math.exp(res.x[1]))
    order = np.argsort(s)
    emp = np.cumsum(w[order]) / n
    fitted = _discrete_lognormal_cdf(s[order], mu, sigma)
    return LognormalFit(mu=mu, sigma=sigma, ks=float(np.max(np.abs(emp - fitted))), n=n, loglik=-float(res.fun))


def power_law_multi(sizes: IntArray, requests: IntArray) -> PowerLawFit | None:
    """MLE α of P(k) = k^-α / Σ_{j=2..K} j^-α for the multi-key part of a multiget-size histogram, K = the largest
    size (its maximum-likelihood value). α may be 0 (every size in 2..K equally likely); bounded search in [0, 10].
    """
    part = _multi_part(sizes, requests)
    if part is None:
        return None
    s, w, n = part
    top = int(s.max())
    sum_ln = float(np.sum(w * np.log(s)))

    def norm(alpha: float) -> float:
        return harmonic(top, alpha) - 1.0  # Σ_{j=2..K} j^-α

    def nll(alpha: float) -> float:
        return alpha * sum_ln + n * math.log(norm(alpha))

    res = optimize.minimize_scalar(nll, bounds=(0.0, 10.0), method="bounded", options={"xatol": 1e-7})
    alpha = float(res.x)
    order = np.argsort(s)
    emp = np.cumsum(w[order]) / n
    z = norm(alpha)
    fitted = np.array([(harmonic(int(k), alpha) - 1.0) / z for k in s[order]])
    return PowerLawFit(alpha=alpha, min_size=2, max_size=top, ks=float(np.max(np.abs(emp - fitted))), n=n,
                       loglik=-float(res.fun))


def power_law_ccdf(k: FloatArray, alpha: float, max_size: int) -> FloatArray:
    """P(size >= k) of P(j) ∝ j^-α on 2..max_size, for integer k in 2..max_size."""
    z = harmonic(max_size, alpha) - 1.0
    below = np.array([harmonic(int(x) - 1, alpha) - 1.0 for x in np.asarray(k)], dtype=np.float64)
    return np.asarray(1.0 - below / z, dtype=np.float64)


#: Half the 5% critical value of χ² with one degree of freedom: the log-likelihood gain the lognormal's second
#: parameter must buy over the one-parameter power law to be preferred (a likelihood-ratio test).
LOGLIK_GAIN_FOR_LOGNORMAL = 3.841458820694124 / 2


def size_model(lognormal: LognormalFit | None, power_law: PowerLawFit | None) -> str | None:
    """"lognormal" or "power_law": the model the multi-key sizes support, None when neither was fitted.

    The lognormal has one parameter more; it is kept only when it fits significantly better (log-likelihood gain
    above `LOGLIK_GAIN_FOR_LOGNORMAL`). Over a range where a lognormal is straight on log-log axes (σ so large
    that its curvature is invisible, μ far below 2) its μ and σ are not separately identifiable — a power law
    with one parameter describes the same sizes, so that is the one reported.
    """
    if power_law is None:
        return "lognormal" if lognormal is not None else None
    if lognormal is None:
        return "power_law"
    return "lognormal" if lognormal.loglik - power_law.loglik > LOGLIK_GAIN_FOR_LOGNORMAL else "power_law"


def gpd_tail(values: FloatArray, threshold: float, *, min_exceedances: int = 50) -> GpdFit | None:
    """Generalized Pareto fit (shape ξ, scale σ) of `values - threshold` for values above `threshold`."""
    exc = values[values > threshold] - threshold
    if exc.size < min_exceedances or float(np.ptp(exc)) == 0.0:
        return None
    xi, _, sigma = stats.genpareto.fit(exc, floc=0.0)
    ks = stats.kstest(exc, "genpareto", args=(xi, 0.0, sigma)).statistic
    return GpdFit(xi=float(xi), sigma=float(sigma), threshold=float(threshold), n=int(exc.size), ks=float(ks))
