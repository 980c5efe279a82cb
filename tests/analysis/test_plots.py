"""The report's figures on hand-made tables: every figure renders, and degenerate data (one value size, every
request single-key) draws a readable axis instead of matplotlib warnings in the user's console."""

from __future__ import annotations

import base64
import warnings

import pandas as pd

from analysis.report.plots import figures
from analysis.summary import build_summary
from tests.analysis.test_summary import _collected


def _render(**over: object) -> dict[str, bytes]:
    c = _collected(**over)
    doc = build_summary(c)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any matplotlib UserWarning fails the test
        return {fid: base64.b64decode(png) for fid, _, png in figures(c, doc)}


def test_every_supported_figure_is_a_png() -> None:
    figs = _render()
    assert {"sizes", "popularity", "values", "rate", "fanout"} <= set(figs)
    assert all(png.startswith(b"\x89PNG\r\n\x1a\n") for png in figs.values())


def test_one_value_size_and_single_key_requests_render_without_warnings() -> None:
    figs = _render(
        size_hist=pd.DataFrame({"size": [1], "requests": [4]}),
        value_size_hist=pd.DataFrame({"value_size": [1000], "keys": [4], "accesses": [7]}),
    )
    assert {"sizes", "values"} <= set(figs)
