"""The characterization as components a page is built from — the standalone report.html and the web console
both use them:

- `findings(summary) -> list[str]`: plain sentences, read first;
- `figures(summary, tables) -> list[Figure]`: interactive plotly figures (`Figure.title`, `.caption`, `.json()`,
  `.div()`), drawn from summary.json and the tables written next to it (`load_tables(directory)`);
- `tables(summary) -> list[Table]`: the numbers, labelled in words with their units (`analysis.report.labels`);
- `render_report(summary, tables) -> str`: the standalone page, plotly.js embedded once, no external request;
- `plotly_js() -> str`: the plotly.js bundle the figures need (from the plotly wheel; no CDN).
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.report import findings as fd
from analysis.report import units as u
from analysis.report.figures import Figure, figures
from analysis.report.findings import findings
from analysis.report.labels import LABELS, SECTIONS, label, value_text

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Figure", "Table", "figures", "findings", "load_tables", "plotly_js", "render_report", "tables"]


@dataclass(frozen=True)
class Table:
    """A titled table of text cells. `pairs`: a label/value table (`columns` are then ("quantity", "value") and
    need no header row); otherwise `columns` are the headings."""

    id: str
    title: str
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]]
    caption: str = ""
    pairs: bool = True
    fields: list[str] = field(default_factory=list)  # pairs only: the summary field of each row (for links)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "columns": list(self.columns),
                "rows": [list(r) for r in self.rows], "caption": self.caption, "pairs": self.pairs}


def load_tables(directory: Path) -> dict[str, pd.DataFrame]:
    """The tables of an analysis directory (`tables/<name>.parquet`), by name; missing ones are left out."""
    import pandas as pd

    folder = Path(directory) / "tables"
    if not folder.is_dir():
        return {}
    return {p.stem: pd.read_parquet(p) for p in sorted(folder.glob("*.parquet"))}


def plotly_js() -> str:
    """The plotly.js bundle shipped in the plotly wheel (load it once per page, before any figure's div)."""
    from plotly.offline import get_plotlyjs

    return str(get_plotlyjs())


# --- tables --------------------------------------------------------------------------------------------------------

def _get(doc: dict[str, Any], path: str) -> Any:
    cur: Any = doc
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def _pairs(doc: dict[str, Any], section: str, *, only: tuple[str, ...] | None = None) -> tuple[list[tuple[str, ...]],
                                                                                              list[str]]:
    """The labelled scalar fields of a section (nested sections of their own excluded), non-null ones only."""
    rows: list[tuple[str, ...]] = []
    paths: list[str] = []
    own = [p for p in SECTIONS if p != section and p.startswith(section + ".")]
    for path in LABELS:
        if not path.startswith(section + ".") or any(path.startswith(o + ".") for o in own):
            continue
        if only is not None and path.removeprefix(section + ".") not in only:
            continue
        value = _get(doc, path)
        if value is None or isinstance(value, list) or (isinstance(value, dict) and not path.endswith("_range")):
            continue
        rows.append((label(path), value_text(path, value)))
        paths.append(path)
    return rows, paths


def _pair_table(doc: dict[str, Any], section: str, caption: str = "", *, only: tuple[str, ...] | None = None,
                title: str | None = None) -> Table | None:
    if _get(doc, section) is None:
        return None
    rows, paths = _pairs(doc, section, only=only)
    if not rows:
        return None
    return Table(section.rsplit(".", 1)[-1], title or SECTIONS[section], ("quantity", "value"), rows, caption,
                 fields=paths)


def _sizes_caption(doc: dict[str, Any]) -> str:
    one = fd.request_sizes(doc)
    if one is not None:
        return f"Every request asks for {u.keys(one)}: there is no distribution to fit."
    return fd.size_model_reason(doc["multiget_size"]) or ""


def _value_tables(doc: dict[str, Any]) -> list[Table]:
    if not doc["dataset"].get("has_value_size"):
        return []
    one = fd.one_value_size(doc)
    if one is not None:
        vs = doc["value_size"]
        rows: list[tuple[str, ...]] = [("every value", u.bytes_(one)),
                                       (label("value_size.per_key.keys"), u.count(vs["per_key"]["keys"]))]
        return [Table("value_size", SECTIONS["value_size"], ("quantity", "value"), rows,
                      "All values have one size: no percentiles, tail or large-value threshold to report.",
                      fields=["value_size.max", "value_size.per_key.keys"])]
    out = [t for t in (_pair_table(doc, "value_size"),) if t is not None]
    cands = doc["value_size"].get("thr_l_candidates") or []
    if cands:
        cand_rows: list[tuple[str, ...]] = [
            (u.bytes_(c["bytes"]), fd.THR_L_RULES.get(c["rule"], c["rule"]), u.share(c["key_share"]),
             u.share(c["access_share"]), u.share(c["bytes_share"])) for c in cands]
        out.append(Table("thr_l_candidates", "Large-value thresholds (THR_L candidates)",
                         ("threshold", "rule", "keys above", "accesses above", "bytes read above"), cand_rows,
                         "Sizes a scheduler could treat as large (Héron, TailX); the tuner searches over them.",
                         pairs=False))
    return out


def tables(doc: dict[str, Any]) -> list[Table]:
    """The report's tables, in reading order: labelled numbers per section, then the lists (top keys, THR_L
    candidates, latency deciles, slack bounds) and why some values are missing."""
    out: list[Table | None] = [
        _pair_table(doc, "dataset"),
        _pair_table(doc, "multiget_size", _sizes_caption(doc)),
        _pair_table(doc, "key_popularity"),
    ]
    top = doc["key_popularity"].get("top_keys") or []
    if top:
        out.append(Table("top_keys", "Most accessed keys", ("key", "accesses", "share of accesses"),
                         [(str(k["key"]), u.count(k["count"]), u.share(k["share"])) for k in top], pairs=False))
    out.append(_pair_table(doc, "key_popularity.hot_set_drift"))
    out.extend(_value_tables(doc))
    arrivals_caption = ("Every request has the same timestamp: the trace carries no timing."
                        if doc["arrivals"].get("rate_mean") is None else "")
    out.append(_pair_table(doc, "arrivals", arrivals_caption))
    out.append(_pair_table(doc, "fanout", "With one server there is no fan-out."
                           if doc["fanout"].get("servers") == 1 else ""))
    lat = doc.get("latency") or {}
    out.append(_pair_table(doc, "latency"))
    if lat.get("deciles"):
        out.append(Table("latency_deciles", "Size by latency decile",
                         ("decile", "requests", "mean keys per request", "mean latency"),
                         [(str(r["decile"]), u.count(r["requests"]), u.number(r["mean_size"]),
                           f"{u.number(r['mean_latency_us'] / 1000.0)} ms") for r in lat["deciles"]], pairs=False))
    sb = doc.get("slack_bounds") or []
    if sb:
        out.append(Table("slack_bounds", "Slack bounds (simulated FIFO replay)",
                         ("utilization", "ops", "lower bound", "upper bound"),
                         [(u.share(r["utilization"]), u.count(r["ops"]), f"{u.number(r['lower_ms'])} ms",
                           f"{u.number(r['upper_ms'])} ms") for r in sb],
                         "Average cut of an op's latency that reordering could give, per utilization.", pairs=False))
    out.append(_pair_table(doc, "slack_observed"))
    reasons: dict[str, list[str]] = {}  # one row per reason, naming every value it applies to
    for k, why in (doc.get("null_reasons") or {}).items():
        reasons.setdefault(str(why), []).append(label(k))
    if reasons:
        out.append(Table("missing", "Missing values and caveats", ("value", "reason"),
                         [("; ".join(names), why) for why, names in reasons.items()], pairs=False))
    return [t for t in out if t is not None]


# --- the standalone page -------------------------------------------------------------------------------------------

_CSS = """
:root{--ink:#1d2127;--mute:#5b6470;--line:#e2e5e9;--card:#fff;--bg:#f6f7f9;--accent:#1f77b4}
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--ink);background:var(--bg);margin:0}
main{max-width:1240px;margin:0 auto;padding:24px 20px 48px}
h1{font-size:1.6em;margin:0 0 4px} h2{font-size:1.15em;margin:32px 0 12px}
h3{font-size:1em;margin:0 0 6px}
.lede{color:var(--mute);margin:0 0 20px}
.findings{background:var(--card);border:1px solid var(--line);border-left:4px solid var(--accent);border-radius:6px;
  padding:12px 20px}
.findings ul{margin:0;padding-left:1.1em} .findings li{margin:6px 0}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:16px}
.tables{display:grid;grid-template-columns:repeat(auto-fill,minmax(360px,1fr));gap:16px;align-items:start}
.card{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:14px 16px;margin:0;min-width:0}
figcaption,.caption{color:var(--mute);font-size:.88em;margin-top:6px}
table{border-collapse:collapse;width:100%;font-size:.9em}
td,th{padding:4px 6px;border-bottom:1px solid var(--line);text-align:right;vertical-align:top}
th{font-weight:600;color:var(--mute)} td.l,th.l{text-align:left}
table.pairs td:first-child{text-align:left;color:var(--mute);width:58%} td.v{white-space:nowrap}
td{font-variant-numeric:tabular-nums} .wide{grid-column:1/-1}
details.raw{margin-top:32px} details.raw pre{background:var(--card);border:1px solid var(--line);padding:12px;
  overflow:auto;font-size:.8em;max-height:40em}
"""


def _table_html(t: Table) -> str:
    if t.pairs:
        body = "".join(f"<tr><td>{html.escape(r[0])}</td><td class='{'txt' if len(r[1]) > 24 else 'v'}'>"
                       f"{html.escape(r[1])}</td></tr>" for r in t.rows)
        table = f"<table class='pairs'>{body}</table>"
    else:
        head = "".join(f"<th class='{'l' if i == 0 or c in ('rule', 'reason') else ''}'>{html.escape(c)}</th>"
                       for i, c in enumerate(t.columns))
        body = "".join("<tr>" + "".join(
            f"<td class='{'l' if i == 0 or t.columns[i] in ('rule', 'reason') else ''}'>{html.escape(c)}</td>"
            for i, c in enumerate(r)) + "</tr>" for r in t.rows)
        table = f"<table><tr>{head}</tr>{body}</table>"
    wide = " wide" if t.id in ("missing", "thr_l_candidates") else ""
    cap = f"<p class='caption'>{html.escape(t.caption)}</p>" if t.caption else ""
    return f"<section class='card{wide}' id='table-{t.id}'><h3>{html.escape(t.title)}</h3>{table}{cap}</section>"


def _lede(doc: dict[str, Any]) -> str:
    ds, ar = doc["dataset"], doc["arrivals"]
    span = (f" over {u.duration(ar['duration_s'])}" if ar.get("duration_s") else "")
    src = f", from <code>{html.escape(str(ds['source']))}</code>" if ds.get("source") else ""
    return (f"{u.count(ds['rows'])} key accesses in {u.count(ds['requests'])} requests{html.escape(span)}{src}. "
            "Hover a figure for its values; drag to zoom, double-click to zoom out.")


def render_report(doc: dict[str, Any], data: Mapping[str, pd.DataFrame] | None = None) -> str:
    """The standalone report.html: findings, figures, tables, the summary itself; plotly.js inlined once, so the
    page makes no request (it opens offline and from a file)."""
    figs = figures(doc, data)
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        "<title>tailtune · workload characterization</title>",
        f"<style>{_CSS}</style>",
    ]
    if figs:
        parts.append(f"<script type='text/javascript'>{plotly_js()}</script>")
    parts.append("</head><body><main>")
    parts.append(f"<h1>Workload characterization</h1><p class='lede'>{_lede(doc)}</p>")
    parts.append("<section class='findings'><h2 style='margin-top:6px'>Findings</h2><ul>"
                 + "".join(f"<li>{html.escape(s)}</li>" for s in findings(doc)) + "</ul></section>")
    if figs:
        parts.append("<h2>Figures</h2><div class='grid'>")
        for f in figs:
            parts.append(f"<figure class='card' id='{f.id}'><h3>{html.escape(f.title)}</h3>{f.div()}"
                         f"<figcaption>{html.escape(f.caption)}</figcaption></figure>")
        parts.append("</div>")
    parts.append("<h2>Numbers</h2><div class='tables'>"
                 + "".join(_table_html(t) for t in tables(doc)) + "</div>")
    parts.append("<details class='raw'><summary>The same numbers as JSON (summary.json, for programs)</summary><pre>"
                 + html.escape(json.dumps(doc, indent=1)) + "</pre></details></main></body></html>")
    return "".join(parts)
