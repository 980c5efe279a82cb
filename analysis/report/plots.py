"""The report's figures: matplotlib (Agg) rendered to PNG and returned base64-encoded for inline <img>."""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from analysis import fits

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from analysis.summary import Collected

__all__ = ["Figure", "figures"]

Figure = tuple[str, str, str]  # (id, caption, base64 PNG)


def _png(draw: Callable[[Axes], None]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.0, 3.6), dpi=90)
    try:
        draw(ax)
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    finally:
        plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _log_xlim(ax: Axes, values: np.ndarray[Any, Any]) -> None:
    """A log x axis that stays readable when every value is the same (one point has no range to scale)."""
    lo, hi = float(np.min(values)), float(np.max(values))
    if lo > 0 and lo == hi:
        ax.set_xlim(lo / 2, hi * 2)  # before the scale: autoscaling one point warns and picks its own range
    ax.set_xscale("log")


def _ccdf(values: np.ndarray[Any, Any], weights: np.ndarray[Any, Any]) -> tuple[Any, Any]:
    order = np.argsort(values)
    v, w = values[order].astype(float), weights[order].astype(float)
    tail = 1.0 - (np.cumsum(w) - w) / w.sum()  # P(X >= v)
    return v, tail


def _sizes(c: Collected) -> Callable[[Axes], None]:
    def draw(ax: Axes) -> None:
        v, p = _ccdf(c.size_hist["size"].to_numpy(), c.size_hist["requests"].to_numpy())
        ax.step(v, p, where="post")
        _log_xlim(ax, v)
        ax.set_yscale("log")
        ax.set_xlabel("multiget size (keys)")
        ax.set_ylabel("P(size ≥ x)")
    return draw


def _rank_frequency(c: Collected) -> Callable[[Axes], None]:
    def draw(ax: Axes) -> None:
        counts = c.count_of_counts["count"].to_numpy(np.int64)
        keys = c.count_of_counts["keys"].to_numpy(np.int64)
        freq = fits.sorted_frequencies(counts, keys)
        ranks = np.arange(1, freq.size + 1)
        ax.loglog(ranks, freq, ".", markersize=2, label="observed")
        rank_max = fits.fit_rank_max(counts, keys)
        fitted = ranks[:rank_max]
        ols = fits.zipf_ols(counts, keys, rank_max)
        if ols is not None and ols.intercept is not None:
            ax.loglog(fitted, np.exp(ols.intercept) * fitted**-ols.alpha, "-", label=f"OLS α={ols.alpha:.2f}")
        mle = fits.zipf_mle(counts, keys, rank_max)
        if mle is not None:
            scale = freq[:rank_max].sum() / fits.harmonic(rank_max, mle.alpha)
            ax.loglog(fitted, scale * fitted**-mle.alpha, "--", label=f"MLE α={mle.alpha:.2f}")
        if rank_max < freq.size:
            ax.axvspan(rank_max, freq.size, color="gray", alpha=0.12, label="not fitted (count < 5)")
        ax.set_xlabel("key rank")
        ax.set_ylabel("accesses")
        ax.legend()
    return draw


def _value_sizes(c: Collected, doc: dict[str, Any]) -> Callable[[Axes], None]:
    def draw(ax: Axes) -> None:
        h = c.value_size_hist.sort_values("value_size")
        v = h["value_size"].to_numpy(float)
        for col, label in (("keys", "per key"), ("accesses", "per access")):
            w = h[col].to_numpy(float)
            ax.step(v, np.cumsum(w) / w.sum(), where="post", label=label)
        for cand in doc["value_size"].get("thr_l_candidates") or []:
            ax.axvline(cand["bytes"], linestyle=":", color="gray")
            ax.text(cand["bytes"], 0.02, f" {cand['rule']}", rotation=90, fontsize=7, va="bottom",
                    transform=ax.get_xaxis_transform())  # y in axes units: inside the frame at any y range
        _log_xlim(ax, np.r_[v, [cand["bytes"] for cand in doc["value_size"].get("thr_l_candidates") or []]])
        ax.set_ylim(0.0, 1.02)
        ax.set_xlabel("value size (bytes)")
        ax.set_ylabel("CDF")
        ax.legend()
    return draw


def _fanout(c: Collected) -> Callable[[Axes], None]:
    def draw(ax: Axes) -> None:
        assert c.fanout_hist is not None
        h = c.fanout_hist
        for col in ("opsets", "bottleneck"):
            g = h.groupby(col)["requests"].sum()
            ax.plot(g.index.to_numpy(), g.to_numpy() / g.sum(), "o-", markersize=3, label=col)
        ax.set_yscale("log")
        ax.set_xlabel("servers touched (opsets) / keys in the bottleneck opset")
        ax.set_ylabel("share of requests")
        ax.legend()
    return draw


def _rate(c: Collected) -> Callable[[Axes], None]:
    def draw(ax: Axes) -> None:
        ax.plot(c.rate["start"].to_numpy(), c.rate["rate"].to_numpy())
        ax.set_xlabel("time since first request (s)")
        ax.set_ylabel("requests / s")
    return draw


def _slack(doc: dict[str, Any]) -> Callable[[Axes], None]:
    def draw(ax: Axes) -> None:
        rows = doc["slack_bounds"]
        u = [r["utilization"] for r in rows]
        ax.plot(u, [r["upper_ms"] for r in rows], "o-", label="upper bound")
        ax.plot(u, [r["lower_ms"] for r in rows], "s-", label="lower bound")
        ax.fill_between(u, [r["lower_ms"] for r in rows], [r["upper_ms"] for r in rows], alpha=0.2)
        ax.set_xlabel("utilization")
        ax.set_ylabel("avg per-op latency reduction (ms)")
        ax.legend()
    return draw


def _latency(doc: dict[str, Any]) -> Callable[[Axes], None]:
    def draw(ax: Axes) -> None:
        rows = doc["latency"]["deciles"]
        ax.bar([r["decile"] for r in rows], [r["mean_size"] for r in rows])
        ax.set_xlabel("latency decile")
        ax.set_ylabel("mean multiget size")
    return draw


def figures(c: Collected, doc: dict[str, Any]) -> list[Figure]:
    """Every figure the data supports, in reading order."""
    out: list[Figure] = [
        ("sizes", "Multiget size CCDF (log-log)", _png(_sizes(c))),
        ("popularity", "Rank-frequency of key accesses with fitted Zipf lines", _png(_rank_frequency(c))),
    ]
    if not c.value_size_hist.empty:
        out.append(("values", "Value-size CDF with THR_L candidates", _png(_value_sizes(c, doc))))
    if c.rate["requests"].sum() > 0 and len(c.rate) > 1:
        out.append(("rate", "Request rate over time", _png(_rate(c))))
    if c.fanout_hist is not None and not c.fanout_hist.empty:
        counted = int(c.fanout_hist["requests"].sum())
        sample = f", a sample of {counted:,} requests" if counted < c.requests else ""
        out.append(("fanout", f"Fan-out on {c.servers} servers (RF {c.replication}{sample})", _png(_fanout(c))))
    if doc["slack_bounds"]:
        out.append(("slack", "Slack bounds vs utilization (Rein Fig 5)", _png(_slack(doc))))
    if doc["latency"]["deciles"]:
        out.append(("latency", "Mean multiget size per latency decile (Rein Fig 4)", _png(_latency(doc))))
    return out
