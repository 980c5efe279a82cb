"""The console's figures as plotly.js specs (`{"data", "layout", "config"}`, JSON): the browser draws them with the
plotly.js the console serves, so they zoom, pan, show values on hover and switch their axes between linear and log.

The optimization history and parameter importance are Optuna's own (`optuna.visualization`, plotly figures of the
study in the Optuna storage)."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "COLORS",
    "CONFIG",
    "axis_menu",
    "base_layout",
    "cdf_figure",
    "fidelity_agreement_figure",
    "fidelity_error_figure",
    "log_axis",
    "optuna_figures",
    "percentile_figure",
    "spec",
    "timeline_figure",
]

log = logging.getLogger("tailtune.console")

#: Colour-blind safe (Okabe–Ito), dark enough on white for lines and markers.
COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
#: The legend's name of each recorded curve (`recommendation.cdfs.curves[].name`); the hover shows the config.
_CURVE_NAMES = {"current": "current config", "recommended": "recommended", "best": "best found (not recommended)",
                "patched": "patched alternative", "stock": "stock alternative"}
_PERCENTILES = (("p50_ms", 0.50), ("p95_ms", 0.95), ("p99_ms", 0.99), ("p999_ms", 0.999))


def base_layout(title: str, *, height: int = 400, x: str = "", y: str = "") -> dict[str, Any]:
    """The house layout: the title on the left, plotly's tool bar at the top right, the axis buttons just above the
    plot on the right (room for all three), the legend below."""
    return {
        "title": {"text": title, "font": {"size": 15}, "x": 0.02, "xanchor": "left", "xref": "container",
                  "y": 1.0, "yanchor": "top", "yref": "container", "pad": {"t": 12}},
        "height": height,
        "autosize": True,
        "margin": {"l": 64, "r": 16, "t": 84, "b": 110},
        "font": {"family": "system-ui, sans-serif", "size": 12, "color": "#1f2328"},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "hovermode": "closest",
        # at the figure's foot, below the axis title, inside the margin kept for it (two rows fit on a phone)
        "legend": {"orientation": "h", "x": 0.0, "xanchor": "left", "xref": "container", "y": 0.0,
                   "yanchor": "bottom", "yref": "container"},
        "xaxis": {"title": {"text": x}, "gridcolor": "#d8dee4", "zeroline": False, "automargin": True},
        "yaxis": {"title": {"text": y}, "gridcolor": "#d8dee4", "zeroline": False, "automargin": True},
    }


def log_axis(layout: dict[str, Any], axis: str, *, decades: bool = True) -> None:
    """A log axis; `decades`: labelled at its decades only (1, 10, 100 or 10⁻³, …: for axes spanning several),
    with a grid line at each 2…9 between."""
    layout[f"{axis}axis"].update(type="log", exponentformat="power", dtick="D2")  # …, 2, 5, 10, 20, 50, …
    if decades:
        layout[f"{axis}axis"].update(dtick=1, minor={"showgrid": True, "gridcolor": "#eef1f4", "dtick": "D1"})


def axis_menu(axis: str, start: str, *, decades: bool = True) -> dict[str, Any]:
    """Buttons that switch one axis between log (labelled at decades, or not: see `log_axis`) and linear
    (plotly.js does it in the page)."""
    order = ("log", "linear") if start == "log" else ("linear", "log")
    as_log = {f"{axis}axis.type": "log", f"{axis}axis.dtick": 1 if decades else "D2",
              f"{axis}axis.minor.showgrid": decades}
    as_linear = {f"{axis}axis.type": "linear", f"{axis}axis.dtick": None, f"{axis}axis.minor.showgrid": False}
    return {
        "type": "buttons",
        "direction": "left",
        "x": 1.0,
        "xanchor": "right",
        "y": 1.02,
        "yanchor": "bottom",
        "pad": {"b": 4},
        "showactive": True,
        "bgcolor": "#f6f8fa",
        "bordercolor": "#8c959f",
        "font": {"size": 11},
        "buttons": [
            {"label": f"{axis} {kind}", "method": "relayout", "args": [as_log if kind == "log" else as_linear]}
            for kind in order
        ],
    }


#: plotly's tool bar keeps what a reader of these figures uses: save as PNG, zoom, pan, zoom in/out, reset. The
#: page's script resizes the figures with the window (plotly's own `responsive` throws from its listener when a
#: figure has no size at that moment).
CONFIG = {"displaylogo": False, "responsive": False,
          "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines",
                                     "hoverClosestCartesian", "hoverCompareCartesian"]}


def spec(data: list[dict[str, Any]], layout: dict[str, Any], **config: Any) -> dict[str, Any]:
    """A figure for the page: `{data, layout, config}`; without a legend (one trace) the foot's margin shrinks."""
    legend = [t for t in data if t.get("showlegend", True) is not False]
    if len(legend) < 2 or layout.get("showlegend") is False:
        layout["margin"] = {**layout.get("margin", {}), "b": min(layout.get("margin", {}).get("b", 60), 60)}
    return {"data": data, "layout": layout, "config": {**CONFIG, **config}}


def cdf_figure(cdfs: Mapping[str, Any]) -> dict[str, Any]:
    """The latency CDFs a nightly job recorded (`recommendation.cdfs`) on a log latency axis. It opens on the tail —
    the share of requests slower than each latency (1 − CDF, log axis), where the p99 and p99.9 differences a
    verdict is about are visible — with lines at p99 and p99.9; a button shows the whole CDF."""
    curves = list(cdfs.get("curves") or [])
    data = []
    for tail in (True, False):
        for i, curve in enumerate(curves):
            xs = [float(v) for v in curve.get("latency_ms") or []]
            ys = [float(v) for v in curve.get("cdf") or []]
            if tail:  # the slowest request leaves no share slower than it: a log axis has no 0
                xs, ys = [x for x, y in zip(xs, ys, strict=True) if y < 1.0], [1.0 - y for y in ys if y < 1.0]
            data.append({
                "type": "scatter", "mode": "lines", "visible": tail,
                "name": _CURVE_NAMES.get(str(curve.get("name")), str(curve.get("name"))),
                "legendgroup": str(curve.get("name")), "showlegend": tail,
                "x": xs, "y": ys,
                "line": {"color": COLORS[i % len(COLORS)], "width": 2, "dash": ("solid", "dash", "dot")[i % 3]},
                "hovertemplate": (("%{y:.3%} of requests slower than %{x:.4g} ms" if tail else
                                   "%{y:.3%} of requests within %{x:.4g} ms")
                                  + f"<extra>{curve.get('label', curve.get('name'))}</extra>"),
            })
    n = len(curves)
    layout = base_layout("Latency CDF: the tail", x="request latency (ms)", y="share of requests slower",
                         height=440)
    log_axis(layout, "x")
    log_axis(layout, "y")

    def marks(tail: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        shapes, notes = [], []
        for q, name in ((0.99, "p99"), (0.999, "p99.9")):
            y = 1.0 - q if tail else q
            shapes.append({"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": y, "y1": y,
                           "line": {"color": "#57606a", "width": 1, "dash": "dot"}})
            notes.append({"xref": "paper", "x": 1.0, "xanchor": "right", "yref": "y",
                          "y": math.log10(y) if tail else y, "yanchor": "bottom", "text": name,
                          "showarrow": False, "font": {"size": 11, "color": "#57606a"}})
            if not tail:
                break  # the whole CDF: p99.9 would sit on top of p99
        return shapes, notes

    tail_shapes, tail_notes = marks(True)
    cdf_shapes, cdf_notes = marks(False)
    layout["shapes"], layout["annotations"] = tail_shapes, tail_notes
    layout["updatemenus"] = [{
        "type": "buttons", "direction": "left", "x": 1.0, "xanchor": "right", "y": 1.02, "yanchor": "bottom",
        "pad": {"b": 4}, "showactive": True, "bgcolor": "#f6f8fa", "bordercolor": "#8c959f", "font": {"size": 11},
        "buttons": [
            {"label": "tail (1 − CDF)", "method": "update",
             "args": [{"visible": [True] * n + [False] * n, "showlegend": [True] * n + [False] * n},
                      {"title.text": "Latency CDF: the tail", "yaxis.type": "log", "yaxis.dtick": 1,
                       "yaxis.title.text": "share of requests slower", "shapes": tail_shapes,
                       "annotations": tail_notes}]},
            {"label": "whole CDF", "method": "update",
             "args": [{"visible": [False] * n + [True] * n, "showlegend": [False] * n + [True] * n},
                      {"title.text": "Latency CDF", "yaxis.type": "linear", "yaxis.dtick": None,
                       "yaxis.title.text": "share of requests", "shapes": cdf_shapes, "annotations": cdf_notes}]},
        ],
    }]
    return spec(data, layout)


def percentile_figure(curves: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Without recorded CDFs: each configuration's p50, p95, p99 and p99.9 as points of its CDF."""
    data = []
    for i, (label, metrics) in enumerate(curves):
        points = [(float(metrics[k]), q) for k, q in _PERCENTILES if metrics.get(k) is not None]
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": label,
            "x": [p[0] for p in points], "y": [p[1] for p in points],
            "line": {"color": COLORS[i % len(COLORS)], "width": 2}, "marker": {"size": 8},
            "hovertemplate": "%{y} of requests ≤ %{x:.4g} ms<extra>%{fullData.name}</extra>",
        })
    layout = base_layout("Percentiles (this job recorded no CDF)", x="request latency (ms)", y="share of requests")
    log_axis(layout, "x")
    layout["updatemenus"] = [axis_menu("x", "log")]
    return spec(data, layout)


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")


def timeline_figure(points: Sequence[Mapping[str, Any]], *, small: bool = False) -> dict[str, Any]:
    """Expected vs observed p99 per report window (`control.observations.timeline`, each point with the
    `band_ms` its version's verify counts as expected, or None), on a log axis: an expected p99 of 0.3 ms and an
    observed one of 150 ms are both visible (on a linear axis from 0 the smaller sits on the zero line)."""
    xs = [_iso(float(p["window_end"])) for p in points]
    text = [f"config v{p['config_version']}, {p['requests']:,} requests, {p['clients']} client(s)" for p in points]
    bands = [p.get("band_ms") for p in points]
    lo = [b[0] if b else None for b in bands]
    hi = [b[1] if b else None for b in bands]
    data: list[dict[str, Any]] = []
    if any(b for b in bands):
        data += [
            {"type": "scatter", "mode": "lines", "x": xs, "y": hi, "line": {"width": 0, "shape": "hv"},
             "showlegend": False, "hoverinfo": "skip", "connectgaps": False},
            {"type": "scatter", "mode": "lines", "x": xs, "y": lo, "line": {"width": 0, "shape": "hv"},
             "fill": "tonexty", "fillcolor": "rgba(0,114,178,0.14)", "name": "verify band (expected)",
             "connectgaps": False, "hovertemplate": "verify band from %{y:.3g} ms<br>%{x}<extra></extra>"},
        ]
    data += [
        {"type": "scatter", "mode": "lines+markers", "name": "observed p99", "x": xs,
         "y": [p.get("observed_p99_ms") for p in points], "text": text, "line": {"color": COLORS[1], "width": 2},
         "hovertemplate": "observed p99 %{y:.3g} ms<br>%{x}<br>%{text}<extra></extra>"},
    ]
    if any(p.get("expected_p99_ms") is not None for p in points):  # none expected: no empty legend entry
        data.append({"type": "scatter", "mode": "lines", "name": "expected p99", "x": xs,
                     "y": [p.get("expected_p99_ms") for p in points],
                     "line": {"color": COLORS[0], "width": 2, "dash": "dash", "shape": "hv"},
                     "hovertemplate": "expected p99 %{y:.3g} ms<br>%{x}<extra></extra>"})
    layout = base_layout("" if small else "Expected vs observed p99", height=170 if small else 380,
                         y="p99 (ms, log scale)")
    layout["xaxis"]["type"] = "date"
    values = [float(v) for p in points for v in (p.get("observed_p99_ms"), p.get("expected_p99_ms"))
              if isinstance(v, int | float) and v > 0]
    values += [float(v) for b in bands if b for v in b if v > 0]
    low, high = min(values, default=0.1), max(values, default=1.0)
    log_axis(layout, "y", decades=high / low > 30)
    # a little room above and below, in decades: the lowest and the highest point not at the edge
    layout["yaxis"]["range"] = [math.log10(low) - 0.15, math.log10(high) + 0.15]
    if small:
        layout["margin"] = {"l": 48, "r": 10, "t": 10, "b": 30}
        layout["showlegend"] = False
        layout["yaxis"]["title"] = {"text": "ms (log)"}
    return spec(data, layout, displayModeBar=not small)


def fidelity_error_figure(series: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The model's error per percentile over the deployment's live replays (`control.fidelity_store.summary`'s
    `series`): per replay, predicted against observed (exp(mean ln(predicted/observed)) − 1 over its configs, %);
    0 is a model that predicts what the cluster did, below 0 one that predicts faster."""
    xs = [_iso(float(p["at"])) for p in series]
    text = [f"record {p['record_id']}" + (f", job {p['job_id']}" if p.get("job_id") else "") for p in series]
    data = []
    for i, metric in enumerate(("p50", "p95", "p99")):
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": f"{metric} error", "x": xs, "text": text,
            "y": [(p.get("error_pct") or {}).get(metric) for p in series],
            "line": {"color": COLORS[i], "width": 2, "dash": ("dot", "dash", "solid")[i]}, "marker": {"size": 7},
            "hovertemplate": f"{metric}: predicted %{{y:+.1f}} % against observed<br>%{{x}}<br>%{{text}}"
                             "<extra></extra>",
        })
    layout = base_layout("Predicted against observed, per replay", height=360, y="predicted / observed − 1 (%)")
    layout["xaxis"]["type"] = "date"
    layout["shapes"] = [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": 0, "y1": 0,
                         "line": {"color": "#57606a", "width": 1}}]
    return spec(data, layout)


def fidelity_agreement_figure(series: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The pair agreement so far (k of m resolved pairs ranked as the cluster did, pooled up to each replay) with
    its 95 % Wilson interval as a band."""
    points = [p for p in series if (p.get("agreement_so_far") or {}).get("m")]
    xs = [_iso(float(p["at"])) for p in points]
    so_far = [p["agreement_so_far"] for p in points]
    lo = [a["interval"][0] for a in so_far]
    hi = [a["interval"][1] for a in so_far]
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines", "x": xs, "y": hi, "line": {"width": 0}, "showlegend": False,
         "hoverinfo": "skip"},
        {"type": "scatter", "mode": "lines", "x": xs, "y": lo, "line": {"width": 0}, "fill": "tonexty",
         "fillcolor": "rgba(0,114,178,0.18)", "name": "95 % interval", "hoverinfo": "skip"},
        {"type": "scatter", "mode": "lines+markers", "name": "agreement so far", "x": xs,
         "y": [a["rate"] for a in so_far], "text": [f"{a['k']} of {a['m']} pairs" for a in so_far],
         "line": {"color": COLORS[0], "width": 2}, "marker": {"size": 7},
         "hovertemplate": "%{text} ranked as the cluster did (%{y:.0%})<br>%{x}<extra></extra>"},
    ]
    layout = base_layout("Pair agreement so far (p99)", height=340, y="share of resolved pairs")
    layout["xaxis"]["type"] = "date"
    layout["yaxis"].update(range=[0.0, 1.05], tickformat=".0%")
    return spec(data, layout)


def _plotly_json(fig: Any) -> dict[str, Any]:
    spec: dict[str, Any] = json.loads(fig.to_json())
    layout = spec.get("layout") or {}
    layout.pop("template", None)  # plotly's default template: ~10 kB per figure, and the page has its own style
    house = base_layout(str((layout.get("title") or {}).get("text") or ""))
    layout.update({k: house[k] for k in ("height", "font", "paper_bgcolor", "plot_bgcolor", "title")})
    layout["margin"] = {**house["margin"], "b": 60}  # Optuna's own legend sits beside the plot
    for axis in ("xaxis", "yaxis"):
        layout.setdefault(axis, {}).update(gridcolor="#d8dee4", automargin=True)
    spec["layout"] = layout
    spec["config"] = dict(CONFIG)
    return spec


def optuna_figures(
    study_name: str, storage_url: str, objective: str = "objective"
) -> tuple[list[dict[str, Any]], list[str]]:
    """Optuna's optimization history and parameter importances of a study, as specs; and what could not be
    drawn, as sentences (the study is gone from the storage, too few trials, no parameter varied)."""
    import warnings

    import optuna

    from base.errors import TailtuneError
    from tuner.study import open_storage

    notes: list[str] = []
    try:
        study = optuna.load_study(study_name=study_name, storage=open_storage(storage_url))
    except (KeyError, ValueError, TailtuneError) as exc:
        return [], [f"The study {study_name!r} is not in the Optuna storage ({exc})."]
    figures = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        multi = len(study.directions) > 1
        target = (lambda t: t.values[0]) if multi else None
        name = f"{objective}, the first term" if multi else objective
        try:
            history = optuna.visualization.plot_optimization_history(study, target=target, target_name=name)
            figures.append(_plotly_json(history))
        except (ValueError, RuntimeError) as exc:
            notes.append(f"No optimization history: {exc}.")
        try:
            importance = optuna.visualization.plot_param_importances(study, target=target, target_name=name)
            figures.append(_plotly_json(importance))
        except (ValueError, RuntimeError, ZeroDivisionError) as exc:
            notes.append(f"No parameter importance: {exc}.")
    return figures, notes
