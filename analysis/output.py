"""Writes one characterization (summary.json, tables/*.parquet, report.html) into a directory atomically:
everything goes to a staging directory first, which then replaces the target with renames. A write that fails
(a full disk) names the output file it was writing (`OSError.filename`: `out/report.html`), which neither
Python's nor Arrow's write errors do themselves."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["staging_dir", "write_outputs"]


def staging_dir(out: Path, tmp_dir: Path) -> Path:
    """A fresh staging directory under `tmp_dir` when it is on the same filesystem as `out`'s parent (so the
    final step is a rename), else a hidden sibling of `out`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    base = tmp_dir if os.stat(tmp_dir).st_dev == os.stat(out.parent).st_dev else out.parent
    path = base / f".analyze-{uuid.uuid4().hex[:12]}"
    path.mkdir()
    return path


def write_outputs(
    out: Path, tmp_dir: Path, doc: dict[str, Any], tables: dict[str, pd.DataFrame], report_html: str
) -> Path:
    """Write everything, then swap it into `out` (an existing `out` is replaced only once all is written)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    stage = staging_dir(out, tmp_dir)
    writing = out
    try:
        (stage / "tables").mkdir()
        for name, df in tables.items():
            table = pa.Table.from_pandas(df, preserve_index=False)
            writing = out / "tables" / f"{name}.parquet"
            pq.write_table(table, stage / "tables" / f"{name}.parquet")
        writing = out / "report.html"
        (stage / "report.html").write_text(report_html, encoding="utf-8")
        text = json.dumps(doc, indent=2, allow_nan=False) + "\n"
        writing = out / "summary.json"
        (stage / "summary.json").write_text(text, encoding="utf-8")
        writing = out
        old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
        if out.exists():
            out.rename(old)
        stage.rename(out)
        if old.exists():
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(stage, ignore_errors=True)
        if exc.filename is None:
            exc.filename = str(writing)
        raise
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return out
