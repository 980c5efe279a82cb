"""The report's components (analysis.report) on hand-made tables, no Spark: findings in sentences that make sense
for degenerate traces too, no figure the data cannot fill, labels instead of summary keys, one inline plotly.js."""

from __future__ import annotations

import html as htmllib
import json
import re
from typing import Any

import numpy as np
import pandas as pd
import pytest

from analysis.report import figures, findings, plotly_js, render_report, tables
from analysis.report import units as u
from analysis.report.labels import LABELS
from analysis.summary import Collected, build_summary
from tests.analysis.test_summary import _collected


def _doc(**over: object) -> tuple[dict[str, Any], Collected]:
    c = _collected(**over)
    return build_summary(c), c


def _fig_ids(doc: dict[str, Any], c: Collected) -> set[str]:
    return {f.id for f in figures(doc, c.tables())}


def _visible_text(page: str) -> str:
    """What a reader sees: no scripts, no plotly divs, not the collapsed summary.json."""
    page = re.sub(r"<script.*?</script>", " ", page, flags=re.S)
    page = re.sub(r"<details class='raw'>.*?</details>", " ", page, flags=re.S)
    return htmllib.unescape(re.sub(r"<[^>]+>", " ", page))


def _summary_keys(doc: Any, out: set[str] | None = None) -> set[str]:
    out = set() if out is None else out
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.add(k)
            _summary_keys(v, out)
    elif isinstance(doc, list):
        for v in doc:
            _summary_keys(v, out)
    return out


ONE_VALUE_SIZE = pd.DataFrame({"value_size": [1000], "keys": [4], "accesses": [7]})


def test_one_value_size_is_said_in_words_without_a_figure_or_a_zero_share() -> None:
    doc, c = _doc(value_size_hist=ONE_VALUE_SIZE)
    said = " ".join(findings(doc))
    assert "Every value is 1,000 B" in said
    assert "exceed" not in said and not re.search(r"(?<![\d.])0(\.0)?% of (keys|accessed bytes)", said)
    assert doc["findings"] == findings(doc)  # summary.json carries the same sentences
    assert "values" not in _fig_ids(doc, c)
    vt = next(t for t in tables(doc) if t.id == "value_size")
    assert vt.rows[0] == ("every value", "1,000 B")
    assert not any(t.id == "thr_l_candidates" for t in tables(doc))


def test_several_value_sizes_name_the_threshold_with_a_nonzero_share() -> None:
    doc, c = _doc()  # sizes 100, 200, 300: the p90 candidate (300 B) has no key above it, the jump (200 B) has 1/3
    said = " ".join(findings(doc))
    assert "Values above 200 B (the largest jump between per-key size quantiles) are 33% of keys" in said
    assert "values" in _fig_ids(doc, c)


def test_largest_size_shared_by_many_keys_says_no_small_set_stands_out() -> None:
    doc, _ = _doc(value_size_hist=pd.DataFrame({"value_size": [100, 5000], "keys": [1, 9], "accesses": [5, 5]}))
    said = " ".join(findings(doc))
    assert all(c["key_share"] == 0 for c in doc["value_size"]["thr_l_candidates"])
    assert "no small set of large values stands out" in said and "exceed" not in said


@pytest.mark.parametrize(("size", "sentence"), [
    (1, "asks for a single key: there are no multigets"),
    (5, "asks for exactly 5 keys"),
])
def test_one_request_size_is_said_in_words_without_a_figure(size: int, sentence: str) -> None:
    doc, c = _doc(size_hist=pd.DataFrame({"size": [size], "requests": [4]}))
    assert any(sentence in s for s in findings(doc))
    assert "sizes" not in _fig_ids(doc, c)


def test_power_law_sizes_report_the_power_law_and_why_not_the_lognormal() -> None:
    from ingest.profiles.sizes import SinglesPlusPowerLawSizes

    x = SinglesPlusPowerLawSizes(8.6, 0.4, 2000).draw(np.random.default_rng(1), 20_000)
    sizes, reqs = np.unique(x, return_counts=True)
    doc, c = _doc(size_hist=pd.DataFrame({"size": sizes, "requests": reqs}))
    ms = doc["multiget_size"]
    assert ms["size_model"] == "power_law" and ms["power_law_alpha"] == pytest.approx(1.8, abs=0.05)
    said = " ".join(findings(doc))
    assert re.search(r"follow a power law, P\(k\) ∝ k\^−1\.[78]\d for 2 to 1,758 keys", said)
    assert "far below one key" in said and "a power law" in said  # the degenerate lognormal explained
    sizes_fig = next(f for f in figures(doc, c.tables()) if f.id == "sizes")
    assert "power law" in sizes_fig.caption
    assert re.fullmatch(r"power law, α = 1\.[78]\d", json.loads(sizes_fig.json())["data"][1]["name"])
    mt = next(t for t in tables(doc) if t.id == "multiget_size")
    assert ("model of multi-key sizes", "power law") in mt.rows and "median" in mt.caption


def test_lognormal_sizes_report_the_lognormal() -> None:
    rng = np.random.default_rng(3)
    x = np.maximum(1, np.rint(rng.lognormal(1.5, 0.8, 20_000))).astype(np.int64)
    sizes, reqs = np.unique(x, return_counts=True)
    doc, _ = _doc(size_hist=pd.DataFrame({"size": sizes, "requests": reqs}))
    assert doc["multiget_size"]["size_model"] == "lognormal"
    assert any("follow a lognormal: ln(size) has mean μ = 1.5" in s for s in findings(doc))


def test_one_timestamp_has_no_rate_and_says_so() -> None:
    doc, c = _doc(t_start=0.0, t_end=0.0,
                  rate=pd.DataFrame({"window": [0], "start": [0.0], "requests": [4], "rate": [4.0]}),
                  rate_window_s=1.0, gaps={"n": 3, "mean": 0.0, "std": 0.0, "p50": 0.0, "p99": 0.0})
    assert doc["arrivals"]["rate_mean"] is None  # not "4 requests/s" over a made-up second
    assert doc["arrivals"]["interarrival"]["p50_s"] is None
    assert doc["null_reasons"]["arrivals.rate_mean"] == "all requests share one timestamp"
    assert any("Every request has the same timestamp" in s for s in findings(doc))
    assert "rate" not in _fig_ids(doc, c)


def test_one_server_has_no_fanout_figures_and_says_so() -> None:
    doc, c = _doc(servers=1, replication=1, fanout_hist=pd.DataFrame({"opsets": [1], "bottleneck": [1],
                                                                       "requests": [4]}),
                  server_load=pd.DataFrame({"server": [0], "load": [7.0]}))
    assert any("With one server, every request is served by that server" in s for s in findings(doc))
    assert not {"fanout", "load"} & _fig_ids(doc, c)


def test_keys_accessed_alike_have_no_zipf_figure_and_say_so() -> None:
    doc, c = _doc(count_of_counts=pd.DataFrame({"count": [1], "keys": [7]}))
    assert any("Every one of the 7 keys is accessed exactly once" in s for s in findings(doc))
    assert "popularity" not in _fig_ids(doc, c)


def test_no_slack_is_said_without_a_flat_figure() -> None:
    doc, c = _doc(slack=pd.DataFrame({"utilization": [0.1, 0.5], "ops": [4, 4], "upper_ms": [0.0, 0.0],
                                      "lower_ms": [0.0, 0.0]}))
    assert any("no op has slack" in s for s in findings(doc))
    assert "slack" not in _fig_ids(doc, c)


def _full_doc() -> tuple[dict[str, Any], Collected]:
    return _doc(
        slack=pd.DataFrame({"utilization": [0.1, 0.5], "ops": [4, 4], "upper_ms": [0.5, 0.75],
                            "lower_ms": [0.1, 0.25]}),
        latency_corr=0.4,
        latency_deciles=pd.DataFrame({"decile": [1, 2], "requests": [2, 2], "mean_size": [1.5, 2.0],
                                      "mean_latency_us": [100.0, 300.0]}),
        slack_observed={"ops": 4, "upper_ms": 0.2},
    )


def test_every_summary_field_has_a_label() -> None:
    doc, _ = _full_doc()
    paths: set[str] = set()

    def walk(d: dict[str, Any], prefix: str) -> None:
        for k, v in d.items():
            path = f"{prefix}{k}"
            if isinstance(v, dict) and not path.endswith("_range"):
                walk(v, path + ".")
            else:
                paths.add(path)

    walk({k: v for k, v in doc.items() if k not in ("schema_version", "null_reasons", "findings")}, "")
    assert paths - set(LABELS) == set()
    assert set(doc["null_reasons"]) <= set(LABELS)


def test_the_page_shows_words_not_summary_keys() -> None:
    doc, c = _full_doc()
    page = render_report(doc, c.tables())
    text = _visible_text(page)
    raw = sorted(k for k in _summary_keys(doc) if "_" in k or re.fullmatch(r"p\d+(_s)?", k))
    assert [k for k in raw if re.search(rf"\b{re.escape(k)}\b", text)] == []
    for word in ("Findings", "Multiget sizes", "Key popularity", "Value sizes", "Arrivals", "Fan-out",
                 "Slack bounds", "Size by latency decile", "Most accessed keys", "Missing values and caveats"):
        assert word in text
    assert "summary.json" in page and '"schema_version": 1' in htmllib.unescape(page)  # the JSON, collapsed


def test_the_page_is_self_contained_with_plotly_inlined_once() -> None:
    doc, c = _full_doc()
    page = render_report(doc, c.tables())
    bundle = plotly_js()
    assert page.count(bundle) == 1
    rest = page.replace(bundle, "")
    assert re.findall(r"https?://", rest) == []  # no CDN, no external request
    assert " src=" not in rest and "<link" not in rest
    ids = {f.id for f in figures(doc, c.tables())}
    assert ids == {"sizes", "popularity", "values", "rate", "fanout", "load", "slack", "latency"}
    assert all(f"id='figure-{i}'" in rest or f'id="figure-{i}"' in rest for i in ids)


def test_summary_alone_draws_the_figures_it_holds() -> None:
    doc, _ = _full_doc()
    assert {f.id for f in figures(doc)} == {"slack", "latency"}  # no tables: nothing drawn from them
    assert "<script" in render_report(doc)


def test_components_render_as_json() -> None:
    doc, c = _full_doc()
    for f in figures(doc, c.tables()):
        assert f.title and f.caption.endswith(".") and json.loads(f.json())["data"]
    for t in tables(doc):
        d = t.as_dict()
        assert d["title"] and all(len(r) == len(d["columns"]) for r in d["rows"])


@pytest.mark.parametrize(("x", "text"), [(0.41, "41%"), (0.0035, "0.35%"), (0.0, "0%"), (1.0, "100%"),
                                         (0.999, "99.9%"), (0.046, "4.6%"), (None, "—")])
def test_share(x: float | None, text: str) -> None:
    assert u.share(x) == text


@pytest.mark.parametrize(("x", "text"), [(1000, "1,000 B"), (9999, "9,999 B"), (256_000, "256 kB"),
                                         (1.5e6, "1.5 MB")])
def test_bytes(x: float, text: str) -> None:
    assert u.bytes_(x) == text


@pytest.mark.parametrize(("x", "text"), [(20.08, "20.1 s"), (0.000702, "702 µs"), (0.2008, "201 ms"),
                                         (7200.0, "120 min"), (0.0, "0 s")])
def test_duration(x: float, text: str) -> None:
    assert u.duration(x) == text
