"""The report's figures: interactive plotly figures (zoom, values on hover, a log/linear switch on log axes).

Each figure is drawn from summary.json and the tables written next to it (`tables/<name>.parquet`, the names of
`Collected.tables()`). A figure the data cannot fill is not drawn: one value size, one request size, one
timestamp, one server, keys all accessed alike — the findings say so in words instead
(`analysis.report.findings`). Large tables are thinned to at most `MAX_POINTS` points per line (the page stays
light; the lines look the same).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from analysis import fits
from analysis.report import findings as fd
from analysis.report import units as u

if TYPE_CHECKING:
    import pandas as pd
    from plotly.graph_objects import Figure as PlotlyFigure

__all__ = ["CONFIG", "MAX_POINTS", "Figure", "figures"]

#: Points per line above which a line is thinned.
MAX_POINTS = 2000

#: plotly.js options of every figure: no logo, no cloud buttons, resizes with its box.
CONFIG: dict[str, Any] = {
    "displaylogo": False,
    "responsive": True,
    "modeBarButtonsToRemove": ["lasso2d", "select2d", "autoScale2d"],
    "toImageButtonOptions": {"format": "png", "scale": 2},
}

_BLUE, _ORANGE, _GREEN, _GREY, _RED = "#1f77b4", "#ff7f0e", "#2ca02c", "#9a9a9a", "#d62728"


@dataclass(frozen=True)
class Figure:
    """One figure of the report: `figure` is a plotly Figure; `json()` and `div()` render it."""

    id: str
    title: str
    caption: str  # one sentence: what is drawn and how to read it
    figure: PlotlyFigure

    def json(self) -> str:
        """The plotly figure as JSON (`Plotly.newPlot(el, fig.data, fig.layout, CONFIG)` draws it)."""
        return str(self.figure.to_json())

    def div(self) -> str:
        """An HTML <div> that draws the figure; needs plotly.js loaded once on the page (`plotly_js()`)."""
        import plotly.io as pio

        return str(pio.to_html(self.figure, full_html=False, include_plotlyjs=False, config=CONFIG,
                               div_id=f"figure-{self.id}"))


Tables = Mapping[str, "pd.DataFrame"]


def _thin(n: int, x: np.ndarray[Any, Any] | None = None) -> np.ndarray[Any, Any]:
    """Indices of at most MAX_POINTS of n points, first and last kept: evenly spaced in rank, plus (given x > 0)
    evenly spaced in log x, so a long tail on a log axis keeps its shape."""
    if n <= MAX_POINTS:
        return np.arange(n)
    idx = np.linspace(0, n - 1, MAX_POINTS // 2).round().astype(np.int64)
    if x is not None and float(np.min(x)) > 0:
        grid = np.geomspace(float(np.min(x)), float(np.max(x)), MAX_POINTS // 2)
        idx = np.union1d(idx, np.clip(np.searchsorted(x, grid), 0, n - 1))
    return np.unique(np.r_[idx, n - 1])


def _axis_switch(log_x: bool, log_y: bool, *, linear_first: bool = False) -> list[dict[str, Any]]:
    """Buttons (under the plot, left) that switch the given axes between log and linear (the first button is the
    figure's initial state)."""
    if not (log_x or log_y):
        return []
    kind = "log" if log_x and log_y else ("log x" if log_x else "log y")

    def args(t: str) -> dict[str, str]:
        out: dict[str, str] = {}
        if log_x:
            out["xaxis.type"] = t
        if log_y:
            out["yaxis.type"] = t
        return out

    return [{
        "type": "buttons", "direction": "right", "x": 0.0, "xanchor": "right", "y": 0.0, "yanchor": "top",
        "showactive": True, "active": 0, "pad": {"r": 8, "t": 30}, "font": {"size": 10},
        "bgcolor": "#f3f4f6", "bordercolor": "#d0d4da",
        "buttons": [{"label": kind, "method": "relayout", "args": [args("log")]},
                    {"label": "linear", "method": "relayout", "args": [args("linear")]}][::-1 if linear_first else 1],
    }]


def _positive(values: list[Any]) -> tuple[float, float] | None:
    """The smallest and largest positive value of some traces' coordinates."""
    pos = [a[a > 0] for a in (np.asarray(v, dtype=float) for v in values if v is not None) if a.size]
    pos = [a for a in pos if a.size]
    if not pos:
        return None
    return min(float(a.min()) for a in pos), max(float(a.max()) for a in pos)


def _log_ticks(axis: Any, values: list[Any], percent: bool) -> None:
    """Ticks of a log axis: powers of ten once the data span two decades, else 1, 2 and 5 of each decade, written
    out in full (plotly would print a bare leading digit: '2' for 20)."""
    bounds = _positive(values)
    if bounds is None:
        return
    lo, hi = bounds
    if hi / lo >= 100:
        axis(dtick=1, tickformat="~%" if percent else None)
        return
    ticks = [m * 10.0**e for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
             for m in (1, 2, 5) if lo / 1.5 <= m * 10.0**e <= hi * 1.5]
    text = [f"{100 * t:.4g}%" if percent else u.number(t) for t in ticks]
    axis(tickmode="array", tickvals=ticks, ticktext=text)


def _figure(traces: list[Any], x_title: str, y_title: str, *, log_x: bool = False, log_y: bool = False,
            y_percent: bool = False, y_zero: bool = False, legend: bool = True, offer_log_y: bool = False
            ) -> PlotlyFigure:
    """A figure in the report's style; `offer_log_y`: a linear y axis with a button to make it log."""
    import plotly.graph_objects as go

    fig = go.Figure(data=traces)
    fig.update_layout(
        template="plotly_white", height=350, margin={"l": 70, "r": 16, "t": 30, "b": 64},
        font={"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12},
        hovermode="closest", showlegend=legend,
        legend={"orientation": "h", "x": 0.0, "xanchor": "left", "y": 1.02, "yanchor": "bottom",
                "font": {"size": 11}},
        updatemenus=_axis_switch(log_x, log_y) if not offer_log_y else _axis_switch(False, True, linear_first=True),
    )
    common = {"showline": True, "linecolor": "#999", "zeroline": False}
    fig.update_xaxes(title_text=x_title, type="log" if log_x else "linear", **common)
    fig.update_yaxes(title_text=y_title, type="log" if log_y else "linear",
                     rangemode="tozero" if y_zero else "normal", **common)
    if y_percent:
        fig.update_yaxes(tickformat="~%")
    if log_x:
        _log_ticks(fig.update_xaxes, [t.x for t in fig.data], False)
    if log_y:
        _log_ticks(fig.update_yaxes, [t.y for t in fig.data], y_percent)
    return fig


def _line(x: Any, y: Any, name: str, hover: str, *, color: str, dash: str | None = None, shape: str = "linear",
          mode: str = "lines", fill: str | None = None, fillcolor: str | None = None) -> Any:
    import plotly.graph_objects as go

    return go.Scatter(x=x, y=y, name=name, mode=mode, line={"color": color, "dash": dash, "shape": shape},
                      marker={"size": 5, "color": color}, hovertemplate=hover + "<extra></extra>", fill=fill,
                      fillcolor=fillcolor)


def _ccdf(values: np.ndarray[Any, Any], weights: np.ndarray[Any, Any]) -> tuple[Any, Any]:
    order = np.argsort(values)
    v, w = values[order].astype(float), weights[order].astype(float)
    return v, 1.0 - (np.cumsum(w) - w) / w.sum()  # P(X >= v)


# --- one builder per figure: (summary, tables) -> Figure | None ---------------------------------------------------

#: Up to this many distinct request sizes, the sizes are drawn as bars (share of requests per size).
FEW_SIZES = 12


def _sizes(doc: dict[str, Any], t: Tables) -> Figure | None:
    h = t.get("multiget_size_histogram")
    if h is None or len(h) < 2:  # one size: the findings say "every request asks for k keys"
        return None
    if len(h) <= FEW_SIZES:
        return _few_sizes(h)
    v, p = _ccdf(h["size"].to_numpy(np.int64), h["requests"].to_numpy(np.int64))
    i = _thin(v.size, v)
    traces = [_line(v[i], p[i], "requests", "%{y:.3p} of requests ask for %{x:,} keys or more", color=_BLUE,
                    shape="hv", mode="lines+markers")]
    ms = doc["multiget_size"]
    model, top, multi = ms.get("size_model"), ms.get("max"), ms.get("frac_multi")
    note = ""
    if model is not None and top is not None and multi and top > 2:
        k = np.unique(np.geomspace(2, top, 200).round())
        tail = None
        if model == "power_law" and ms.get("power_law_alpha") is not None:
            if (ms.get("power_law_ks") or 0.0) <= fd.POOR_FIT_KS:
                tail = fits.power_law_ccdf(k, ms["power_law_alpha"], int(top))
            name = f"power law, α = {ms['power_law_alpha']:.2f}"
        elif model == "lognormal" and ms.get("lognormal_mu") is not None:
            if (ms.get("lognormal_ks") or 0.0) <= fd.POOR_FIT_KS:
                tail = fits.lognormal_multi_ccdf(k, ms["lognormal_mu"], ms["lognormal_sigma"])
            name = f"lognormal, μ = {ms['lognormal_mu']:.2f}, σ = {ms['lognormal_sigma']:.2f}"
        if tail is not None:
            shown = multi * tail >= 0.5 * float(p.min())  # down to the data's last point, not the model's end
            k, tail = k[shown], tail[shown]
        if tail is not None and k.size:
            traces.append(_line(k, multi * tail, name, "model: %{y:.3p} at %{x:,} keys or more", color=_ORANGE,
                                dash="dash"))
            note = f" The dashed line is the fitted {name} of the multi-key requests."
    caption = ("Share of requests that ask for at least x keys, on log-log axes, where a power law is a straight "
               "line." + note)
    return Figure("sizes", "Multiget sizes", caption,
                  _figure(traces, "keys per request (x)", "share of requests with ≥ x keys", log_x=True,
                          log_y=True, y_percent=True))


def _few_sizes(h: pd.DataFrame) -> Figure:
    import plotly.graph_objects as go

    size = h["size"].to_numpy(np.int64)
    share = h["requests"].to_numpy(float) / float(h["requests"].sum())
    bar = go.Bar(x=[u.keys(int(k)) for k in size], y=share, marker={"color": _BLUE}, name="requests",
                 hovertemplate="%{x}: %{y:.3p} of requests<extra></extra>")
    fig = _figure([bar], "keys per request", "share of requests", y_percent=True, y_zero=True, legend=False)
    fig.update_xaxes(type="category")
    caption = f"Share of requests of each size: with only {len(size)} sizes, bars show them better than a curve."
    return Figure("sizes", "Multiget sizes", caption, fig)


def _popularity(doc: dict[str, Any], t: Tables) -> Figure | None:
    h = t.get("key_count_of_counts")
    if h is None or len(h) < 2:  # one key, or every key accessed alike: said in words
        return None
    counts = h["count"].to_numpy(np.int64)
    keys = h["keys"].to_numpy(np.int64)
    order = np.argsort(-counts, kind="stable")
    c, k = counts[order], keys[order]
    end = np.cumsum(k)
    start = end - k + 1
    rank_max = fits.fit_rank_max(counts, keys)
    # the rank-frequency staircase: each group of keys with one count is a flat step from its first to last rank
    x = np.ravel(np.column_stack([start, end])).astype(float)
    y = np.repeat(c, 2).astype(float)
    keep = _thin(x.size, x)
    x, y = x[keep], y[keep]
    fitted = x <= rank_max
    traces = [_line(x[fitted], y[fitted], "keys fitted", "rank %{x:,}: %{y:,} accesses", color=_BLUE)]
    if not fitted.all():
        lo = max(int(np.argmax(~fitted)) - 1, 0)
        traces.append(_line(x[lo:], y[lo:], "not fitted (fewer than 5 accesses)", "rank %{x:,}: %{y:,} accesses",
                            color=_GREY))
    r = np.unique(np.geomspace(1, rank_max, 100).round())
    ols = fits.zipf_ols(counts, keys, rank_max)
    if ols is not None and ols.intercept is not None:
        traces.append(_line(r, np.exp(ols.intercept) * r**-ols.alpha, f"least squares, α = {ols.alpha:.2f}",
                            "least squares: rank %{x:,}, %{y:.3g} accesses", color=_ORANGE))
    mle = fits.zipf_mle(counts, keys, rank_max)
    if mle is not None:
        freq_top = float(np.sum(fits.sorted_frequencies(counts, keys)[:rank_max]))
        scale = freq_top / fits.harmonic(rank_max, mle.alpha)
        traces.append(_line(r, scale * r**-mle.alpha, f"maximum likelihood, α = {mle.alpha:.2f}",
                            "maximum likelihood: rank %{x:,}, %{y:.3g} accesses", color=_GREEN, dash="dash"))
    caption = ("Accesses per key against the key's rank (1 = most accessed), log-log; a Zipf law is a straight "
               "line of slope −α. The lines are Zipf fits over the keys accessed at least 5 times (rarer keys "
               "are mostly sampling noise).")
    return Figure("popularity", "Key popularity", caption,
                  _figure(traces, "key rank", "accesses", log_x=True, log_y=True))


def _values(doc: dict[str, Any], t: Tables) -> Figure | None:
    h = t.get("value_size_histogram")
    if h is None or len(h) < 2:  # no sizes, or one size: said in words
        return None
    h = h.sort_values("value_size")
    v = h["value_size"].to_numpy(float)
    traces = []
    for col, label, color in (("keys", "per key", _BLUE), ("accesses", "per access", _ORANGE)):
        w = h[col].to_numpy(float)
        cdf = np.cumsum(w) / w.sum()
        i = _thin(v.size, v)
        traces.append(_line(v[i], cdf[i], label, f"{label}: %{{y:.3p}} of values ≤ %{{x:,}} B", color=color,
                            shape="hv"))
    for cand in doc["value_size"].get("thr_l_candidates") or []:
        b = cand["bytes"]
        words = fd.THR_L_RULES.get(cand["rule"], cand["rule"])
        traces.append(_line([b, b], [0, 1], f"{u.bytes_(b)}: {words}",
                            f"{u.bytes_(b)} ({words}): {u.share(cand['key_share'])} of keys and "
                            f"{u.share(cand['bytes_share'])} of bytes read lie above", color=_GREY, dash="dot"))
    caption = ("Cumulative share of values at or below a size, counting each key once (per key) or once per "
               "access (per access); dotted lines are the candidate large-value thresholds (THR_L).")
    return Figure("values", "Value sizes", caption,
                  _figure(traces, "value size (bytes)", "share of values ≤ size", log_x=True, y_percent=True))


def _rate(doc: dict[str, Any], t: Tables) -> Figure | None:
    h = t.get("arrival_rate")
    ar = doc["arrivals"]
    if h is None or len(h) < 2 or ar.get("rate_mean") is None:  # one timestamp: said in words
        return None
    trace = _line(h["start"].to_numpy(float), h["rate"].to_numpy(float), "requests/s",
                  "from %{x:.3g} s: %{y:,.0f} requests/s", color=_BLUE)
    caption = (f"Requests per second in {u.count(ar['windows'])} windows of {u.duration(ar['window_s'])}; "
               "the axis starts at zero, so the swings are to scale.")
    return Figure("rate", "Arrival rate", caption,
                  _figure([trace], "time since the first request (s)", "requests per second", y_zero=True,
                          legend=False))


def _drift(doc: dict[str, Any], t: Tables) -> Figure | None:
    d = doc["key_popularity"].get("hot_set_drift") or {}
    j = d.get("jaccard_consecutive") or []
    if len(j) < 2:
        return None
    x = (np.arange(len(j)) + 1) * float(d["window_s"])
    trace = _line(x, j, "overlap", "at %{x:.3g} s: %{y:.0%} of the hot set kept", color=_BLUE,
                  mode="lines+markers")
    fig = _figure([trace], "time of the window boundary (s)", "hot-set overlap (Jaccard)", y_percent=True,
                  legend=False)
    fig.update_yaxes(range=[0, 1.02])
    caption = (f"Overlap of the {d['top_n']} most accessed keys of one {u.duration(d['window_s'])} window "
               "with the next (100% = the same keys stay hot).")
    return Figure("drift", "Hot-set drift", caption, fig)


def _fanout(doc: dict[str, Any], t: Tables) -> Figure | None:
    h = t.get("fanout_histogram")
    fo = doc["fanout"]
    if h is None or h.empty or fo.get("servers") == 1 or fo.get("opsets_max") == 1:
        return None
    traces = []
    for col, label, color in (("opsets", "servers touched", _BLUE), ("bottleneck", "keys on the busiest server",
                                                                      _ORANGE)):
        g = h.groupby(col)["requests"].sum()
        share = g.to_numpy(float) / float(g.sum())
        traces.append(_line(g.index.to_numpy(), share, label, f"%{{y:.3p}} of requests: %{{x}} {label}",
                            color=color, mode="markers"))
    sample = (f" Counted on a sample of {u.count(fo['requests_counted'])} requests."
              if (fo.get("requests_fraction") or 1.0) < 1.0 else "")
    caption = (f"How many of the {u.count(fo['servers'])} servers a request touches (replication "
               f"{fo['replication']}, each key read from its primary replica), and how many of its keys the busiest "
               f"of them serves.{sample}")
    return Figure("fanout", "Fan-out", caption,
                  _figure(traces, "servers touched / keys on the busiest server", "share of requests", log_y=True,
                          y_percent=True))


def _load(doc: dict[str, Any], t: Tables) -> Figure | None:
    import plotly.graph_objects as go

    h = t.get("server_load")
    if h is None or len(h) < 2:
        return None
    load = h["load"].to_numpy(float)
    mean = float(load.mean())
    if mean <= 0:
        return None
    rel = load / mean
    hottest = int(np.argmax(load))
    colors = [_RED if i == hottest else _BLUE for i in range(load.size)]
    bar = go.Bar(x=h["server"].to_numpy(), y=rel, marker={"color": colors}, name="load",
                 hovertemplate="server %{x}: %{y:.3f}× the mean load<extra></extra>")
    fig = _figure([bar], "server", "load / mean load", legend=False, y_zero=True)
    fig.update_xaxes(dtick=1 if load.size <= 32 else None)
    caption = ("Each server's share of the accesses (spread over the replicas of each key) relative to the mean; "
               "the busiest server is in red.")
    return Figure("load", "Load per server", caption, fig)


def _slack(doc: dict[str, Any], t: Tables) -> Figure | None:
    rows = doc.get("slack_bounds") or []
    if len(rows) < 2 or all(r["upper_ms"] == 0 for r in rows):
        return None
    x = [r["utilization"] for r in rows]
    traces = [
        _line(x, [r["lower_ms"] for r in rows], "lower bound", "at %{x:.0%} load: at least %{y:.3g} ms",
              color=_BLUE, mode="lines+markers"),
        _line(x, [r["upper_ms"] for r in rows], "upper bound", "at %{x:.0%} load: at most %{y:.3g} ms",
              color=_ORANGE, mode="lines+markers", fill="tonexty", fillcolor="rgba(255,127,14,0.15)"),
    ]
    fig = _figure(traces, "utilization", "latency cut per op (ms)", y_zero=True, offer_log_y=True)
    fig.update_xaxes(tickformat=".0%")
    caption = ("How much reordering ops could cut the average op's latency in a simulated FIFO replay of the "
               "trace's first requests, between a lower and an upper bound (Rein, Fig. 5).")
    return Figure("slack", "Slack bounds", caption, fig)


def _latency(doc: dict[str, Any], t: Tables) -> Figure | None:
    import plotly.graph_objects as go

    rows = (doc.get("latency") or {}).get("deciles") or []
    if not rows:
        return None
    bar = go.Bar(x=[r["decile"] for r in rows], y=[r["mean_size"] for r in rows], marker={"color": _BLUE},
                 customdata=[r["mean_latency_us"] / 1000.0 for r in rows], name="mean size",
                 hovertemplate="decile %{x}: %{y:.3g} keys on average, %{customdata:.3g} ms<extra></extra>")
    fig = _figure([bar], "latency decile (1 = fastest tenth)", "mean keys per request", legend=False,
                  y_zero=True)
    fig.update_xaxes(dtick=1)
    caption = "Mean multiget size of the requests in each tenth of the latency distribution (Rein, Fig. 4)."
    return Figure("latency", "Size by latency", caption, fig)


_BUILDERS: tuple[Callable[[dict[str, Any], Tables], Figure | None], ...] = (
    _sizes, _popularity, _values, _rate, _drift, _fanout, _load, _slack, _latency,
)


def figures(doc: dict[str, Any], tables: Tables | None = None) -> list[Figure]:
    """Every figure the data supports, in reading order. Without `tables` (summary.json alone), only the
    figures drawn from the summary itself (hot-set drift, slack bounds, size by latency)."""
    t: Tables = tables or {}
    return [f for build in _BUILDERS if (f := build(doc, t)) is not None]
