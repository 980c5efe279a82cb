"""report.html: one self-contained page (inline CSS, inline base64 PNG figures, no external requests)."""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

from analysis.report.plots import figures

if TYPE_CHECKING:
    from analysis.summary import Collected

__all__ = ["render_report"]

_CSS = """
body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.5em} h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
figure{margin:1em 0} figcaption{font-size:.9em;color:#555}
table{border-collapse:collapse;font-size:.9em} td,th{border:1px solid #ddd;padding:.2em .6em;text-align:right}
th{background:#f5f5f5} td.l,th.l{text-align:left} .note{color:#8a5a00}
"""


def _num(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.4g}"
    return html.escape(str(x))


def _table(rows: list[dict[str, Any]], cols: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{_num(r.get(c))}</td>" for c in cols) + "</tr>" for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _section(title: str, d: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><th class='l'>{html.escape(k)}</th><td>{_num(v)}</td></tr>"
        for k, v in d.items() if not isinstance(v, dict | list)
    )
    return f"<h2>{html.escape(title)}</h2><table>{rows}</table>"


def render_report(c: Collected, doc: dict[str, Any]) -> str:
    """The HTML page for one characterization."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>tailtune workload report</title>"
             f"<style>{_CSS}</style></head><body><h1>Workload characterization</h1>"]
    src = doc["dataset"].get("source")
    parts.append(f"<p>{_num(doc['dataset']['rows'])} accesses in {_num(doc['dataset']['requests'])} requests"
                 + (f" from <code>{html.escape(str(src))}</code>" if src else "") + ".</p>")
    parts.append("<h2>Findings</h2><ul>" + "".join(f"<li>{html.escape(s)}</li>" for s in doc["findings"])
                 + "</ul>")
    for fid, caption, png in figures(c, doc):
        alt = html.escape(caption)
        parts.append(f"<figure id='{fid}'><img alt='{alt}' src='data:image/png;base64,{png}'>"
                     f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    for key, title in (("multiget_size", "Multiget sizes"), ("key_popularity", "Key popularity"),
                       ("value_size", "Value sizes"), ("arrivals", "Arrivals"), ("fanout", "Fan-out")):
        parts.append(_section(title, doc[key]))
    parts.append("<h2>Top keys</h2>" + _table(doc["key_popularity"]["top_keys"], ["key", "count", "share"]))
    cands = doc["value_size"].get("thr_l_candidates") or []
    if cands:
        parts.append("<h2>THR_L candidates</h2>"
                     + _table(cands, ["rule", "bytes", "key_share", "access_share", "bytes_share"]))
    if doc["slack_bounds"]:
        parts.append("<h2>Slack bounds</h2>"
                     + _table(doc["slack_bounds"], ["utilization", "ops", "upper_ms", "lower_ms"]))
    if doc["null_reasons"]:
        parts.append("<h2>Missing values</h2><ul class='note'>" + "".join(
            f"<li><code>{html.escape(k)}</code>: {html.escape(v)}</li>"
            for k, v in doc["null_reasons"].items()
        ) + "</ul>")
    parts.append("<details><summary>summary.json</summary><pre>"
                 + html.escape(json.dumps(doc, indent=1)) + "</pre></details></body></html>")
    return "".join(parts)
