"""The whole job end to end: generated trace with known parameters, the real Twitter sample, the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from analysis.pipeline import Options
from analysis.report import plotly_js
from base.settings import Settings, get_settings
from jobs.characterize import run

from .conftest import GEN_ALPHA, GEN_MU, GEN_SIGMA, canonical_table, generated_trace
from .test_report import _summary_keys, _visible_text

pytestmark = pytest.mark.spark


def _nearest_rank(x: np.ndarray, q: float) -> float:
    s = np.sort(x)
    return float(s[int(np.ceil(q * s.size)) - 1])


@pytest.fixture(scope="module")
def generated_summary(
    spark: SparkSession, generated_parquet: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], Path, dict[str, Any]]:
    path, g = generated_parquet
    out = tmp_path_factory.mktemp("out") / "analysis"
    settings = Settings(home=tmp_path_factory.mktemp("home"))
    doc = run(str(path), out, dataset=False, settings=settings, master="local[2]",
              opts=Options(servers=8, replication=3, slack_requests=1000))
    return doc, out, g


def test_generated_parameters_recovered(generated_summary: tuple[dict[str, Any], Path, dict[str, Any]]) -> None:
    doc, _, g = generated_summary
    sizes = g["sizes"]
    ms = doc["multiget_size"]
    assert ms["requests"] == sizes.size
    assert ms["frac_multi"] == pytest.approx(float(np.mean(sizes >= 2)))
    assert ms["max"] == int(sizes.max())
    for q in ("p50", "p95", "p99"):
        assert ms[q] == _nearest_rank(sizes, int(q[1:]) / 100)
    assert ms["lognormal_mu"] == pytest.approx(GEN_MU, abs=0.05)  # stated tolerance ±0.05 (20k requests)
    assert ms["lognormal_sigma"] == pytest.approx(GEN_SIGMA, abs=0.05)
    kp = doc["key_popularity"]
    assert kp["distinct_keys"] == len(set(g["ranks"].tolist()))
    assert kp["zipf_alpha_mle"] == pytest.approx(GEN_ALPHA, abs=0.04)  # ±0.04
    assert kp["zipf_alpha_ols"] == pytest.approx(GEN_ALPHA, abs=0.15)  # ±0.15 (sampled tail flattens)
    top = np.bincount(g["ranks"]).argmax()
    assert kp["top_keys"][0]["key"] == f"key{top}"
    assert kp["top_keys"][0]["count"] == int(np.bincount(g["ranks"]).max())
    vs = doc["value_size"]
    assert vs["max"] == int(g["value_size"].max())
    assert vs["p50"] == _nearest_rank(g["value_size"], 0.5)  # per access (each key has one size)
    assert vs["gpd_xi"] is not None and vs["thr_l_candidates"]
    fo = doc["fanout"]
    assert (fo["servers"], fo["replication"]) == (8, 3)
    assert (fo["requests_counted"], fo["requests_fraction"]) == (sizes.size, 1.0)  # under the sample limit
    assert 1.0 <= fo["opsets_mean"] <= min(8.0, ms["mean"])
    assert fo["hottest_partition_ratio"] >= 1.0
    sb = doc["slack_bounds"]  # fifo replay of the first 1000 requests in kvsim at 10%…90% utilization
    assert [r["utilization"] for r in sb] == pytest.approx([0.1 * i for i in range(1, 10)])
    assert all(0.0 <= r["lower_ms"] <= r["upper_ms"] for r in sb)
    assert all(r["ops"] == int(np.sum(sizes[:1000])) for r in sb)  # every op of the replayed prefix
    assert sb[-1]["upper_ms"] > sb[0]["upper_ms"]  # more queueing, more slack (Rein Fig 5)


def test_outputs_written(generated_summary: tuple[dict[str, Any], Path, dict[str, Any]]) -> None:
    doc, out, _ = generated_summary
    assert json.loads((out / "summary.json").read_text()) == json.loads(json.dumps(doc))
    hist = pq.read_table(out / "tables" / "multiget_size_histogram.parquet").to_pandas()
    assert int(hist["requests"].sum()) == doc["multiget_size"]["requests"]
    for name in ("key_count_of_counts", "top_keys", "value_size_histogram", "hot_sets", "arrival_rate",
                 "fanout_histogram", "server_load"):
        assert (out / "tables" / f"{name}.parquet").is_file()
    html = (out / "report.html").read_text()
    assert len(re.findall(r"id=[\"']figure-", html)) >= 5  # interactive figures
    rest = html.replace(plotly_js(), "")
    assert len(rest) < len(html) and "http://" not in rest and "https://" not in rest  # plotly.js inline, no CDN
    assert doc["findings"][0] in html.replace("&#x27;", "'")
    assert not list(out.parent.glob(".analyze-*"))  # staging directory renamed away


def _twitter_table(shared_data: Path) -> Any:
    names = ["timestamp", "anon_key", "key_size", "value_size", "client_id", "op", "ttl"]
    t = pacsv.read_csv(shared_data / "cachelib_twitter_sample.csv",
                       read_options=pacsv.ReadOptions(column_names=names))
    n = t.num_rows
    return canonical_table({
        "request_id": list(range(n)), "ts": [float(x) for x in t["timestamp"].to_pylist()],
        "key": t["anon_key"].to_pylist(), "value_size": t["value_size"].to_pylist(),
        "op": t["op"].to_pylist(), "client_id": [str(x) for x in t["client_id"].to_pylist()],
    }), t


def test_real_twitter_sample_through_the_cli(spark: SparkSession, shared_data: Path, cli: Any,
                                             tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the fan-out counts a sample of about 40 of the 100 requests (the setting; docs/analysis.md § Fan-out)
    monkeypatch.setenv("TAILTUNE_ANALYSIS_FANOUT_REQUESTS", "40")
    get_settings.cache_clear()
    table, raw = _twitter_table(shared_data)
    csv = tmp_path / "twitter.csv"
    pacsv.write_csv(table, csv)
    res = cli("analyze", str(csv), "--out", str(tmp_path / "o"), "--servers", "4", "--replication", "2",
              "--json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    keys = raw["anon_key"].to_pylist()
    sizes = np.array(raw["value_size"].to_pylist())
    assert doc["dataset"]["rows"] == raw.num_rows == 100
    assert doc["multiget_size"]["frac_multi"] == 0.0  # one access per request
    assert doc["multiget_size"]["lognormal_mu"] is None
    assert doc["key_popularity"]["distinct_keys"] == len(set(keys))
    counts = sorted({k: keys.count(k) for k in keys}.values(), reverse=True)
    assert doc["key_popularity"]["top_keys"][0]["count"] == counts[0]
    assert doc["value_size"]["max"] == int(sizes.max())
    assert doc["value_size"]["per_key"]["keys"] == len(set(keys))
    assert "key_popularity.zipf_alpha_ols" in doc["null_reasons"]  # top key has < 100 accesses
    assert doc["fanout"]["servers"] == 4 and doc["fanout"]["opsets_mean"] == 1.0
    counted = doc["fanout"]["requests_counted"]
    assert 15 <= counted <= 65 and doc["fanout"]["requests_fraction"] == counted / 100  # 40 expected, ±5 sd
    assert f"a sample of {counted:,} requests" in (tmp_path / "o" / "report.html").read_text()
    assert (tmp_path / "o" / "report.html").is_file()


def test_cli_one_value_size_trace_writes_a_report_that_says_so(spark: SparkSession, cli: Any, tmp_path: Path) -> None:
    g = generated_trace(seed=3)
    path = tmp_path / "fixed.parquet"
    pq.write_table(canonical_table({"request_id": g["request_id"], "ts": g["ts"], "key": g["key"],
                                    "value_size": np.full(g["request_id"].size, 1000)}), path)
    res = cli("analyze", str(path), "--out", str(tmp_path / "o"), "--servers", "4", "--replication", "2")
    assert res.exit_code == 0, res.stderr
    assert "Every value is 1,000 B" in " ".join(res.stdout.split())
    doc = json.loads((tmp_path / "o" / "summary.json").read_text())
    page = (tmp_path / "o" / "report.html").read_text()
    text = " ".join(_visible_text(page).split())
    assert "Every value is 1,000 B" in text and "exceed 1000 B" not in text
    assert "figure-values" not in page  # no empty value-size figure
    assert {"figure-sizes", "figure-popularity", "figure-rate"} <= set(re.findall(r"figure-[a-z]+", page))
    raw = [k for k in _summary_keys(doc) if "_" in k or re.fullmatch(r"p\d+(_s)?", k)]
    assert [k for k in raw if re.search(rf"\b{re.escape(k)}\b", text)] == []


def test_cli_bad_csv_names_file_line_and_field(cli: Any, tmp_path: Path) -> None:
    csv = tmp_path / "bad.csv"
    csv.write_text("request_id,ts,key,value_size\n1,0.0,a,10\n2,zero,b,20\n")
    res = cli("analyze", str(csv), "--out", str(tmp_path / "o"))
    assert res.exit_code == 2
    assert f"{csv}:3: field 'ts': not a number: 'zero'" in res.stderr.replace("\n", "")
    assert not (tmp_path / "o").exists()


def test_cli_missing_column_and_bad_replication(cli: Any, tmp_path: Path) -> None:
    csv = tmp_path / "nokey.csv"
    csv.write_text("request_id,ts,value_size\n1,0.0,10\n")
    res = cli("analyze", str(csv), "--out", str(tmp_path / "o"))
    assert res.exit_code == 2 and "field 'key': required column is missing" in res.stderr
    res = cli("analyze", str(csv), "--out", str(tmp_path / "o"), "--servers", "2", "--replication", "3")
    assert res.exit_code == 2 and "field 'replication'" in res.stderr
    res = cli("analyze", "--out", str(tmp_path / "o"))
    assert res.exit_code == 2
