"""The held-out later stretch of a trace with timestamps: the study tunes on the earlier part, the verdict is
confirmed on the later one (tuner/confirm.py), as production applies a config to future traffic.

The split is by time: the last `fraction` of the trace's span (setting `tune_holdout_fraction`, default 0.2)
is held out, whole requests by their first timestamp. Both parts are written once under
`TAILTUNE_HOME/samples/` like a sample (tuner/sampling.py), so the study's `reproduce` commands replay the
earlier part. A trace without timestamps, or whose held-out part is too short for the confirmation's batches
(`tune_holdout_min_requests`), is not split: the confirmation then replays fresh seeds of the whole trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from base.settings import Settings
from simulation.source import WorkloadSource
from tuner import sampling

__all__ = ["Split", "split_source"]


@dataclass(frozen=True)
class Split:
    early: WorkloadSource
    late: WorkloadSource
    record: dict[str, Any]


def split_source(source: WorkloadSource, fraction: float, settings: Settings, *, min_requests: int) -> Split | None:
    """The earlier and the held-out later part of `source` (None: no timestamps, no fraction, or too short).

    Memory: a Parquet-backed source (a dataset, a Parquet trace) is split in one streaming pass, one batch at a
    time; any other source (a generator profile, a CSV trace) is loaded once and written whole under
    `TAILTUNE_HOME/samples` first, then split the same way — the table is never held beside a copy of a part."""
    if not 0.0 < fraction < 1.0:
        return None
    files = sampling._parquet_files(source, settings)
    if files:
        if not source.has_timestamps(settings):
            return None
    else:
        whole = _written_whole(source, settings)
        if whole is None:
            return None
        files = [whole]
    t0, t1 = sampling.parquet_span(files)
    if not t1 > t0:
        return None
    at = t0 + (1.0 - fraction) * (t1 - t0)
    early_path, late_path, counts = _split_files(source, files, at, settings)
    if counts["late"] < min_requests:
        return None
    record = {"fraction": fraction, "requests": counts["late"], "tuned_on_requests": counts["early"],
              "from_s": at - t0, "to_s": t1 - t0}
    return Split(WorkloadSource(trace=str(early_path)), WorkloadSource(trace=str(late_path)), record)


def _written_whole(source: WorkloadSource, settings: Settings) -> Path | None:
    """`source`'s rows as one Parquet file under `TAILTUNE_HOME/samples` (written once; None: no `ts` column or
    no spread of it)."""
    import os

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = settings.home_dir / "samples" / f"whole-{sampling.source_key(source)}.parquet"
    if path.exists():
        return path
    table = source.load(settings)
    if "ts" not in table.column_names:
        return None
    span = pc.min_max(table.column("ts")).as_py()
    if span["min"] is None or not span["max"] > span["min"]:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)
    return path


def _split_files(source: WorkloadSource, files: list[Path], at: float, settings: Settings,
                 batch_rows: int = 1 << 20) -> tuple[Path, Path, dict[str, int]]:
    """Rows with `ts` < `at` to the early file, the rest to the late one, in one pass that holds one batch; the
    requests in each (a change of `request_id` between consecutive rows, as tuner/sampling.py counts). Written
    once per source and cut (the counts beside them), renamed into place when complete."""
    import json
    import os

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    base = settings.home_dir / "samples" / f"split-{sampling.source_key(source, at)}"
    early, late, meta = (base.with_name(base.name + s) for s in ("-early.parquet", "-late.parquet", ".json"))
    if early.exists() and late.exists() and meta.exists():
        return early, late, json.loads(meta.read_text())
    base.parent.mkdir(parents=True, exist_ok=True)
    tmp = {k: p.with_name(f".{p.name}.tmp-{os.getpid()}") for k, p in (("early", early), ("late", late))}
    writers: dict[str, Any] = {}
    counts = {"early": 0, "late": 0}
    last: dict[str, int | None] = {"early": None, "late": None}
    try:
        for path in files:
            pf = pq.ParquetFile(path, pre_buffer=False)
            for batch in pf.iter_batches(batch_size=batch_rows):
                ts = batch.column("ts").to_numpy().astype(np.float64)
                early_mask = ts < at
                for part, mask in (("early", early_mask), ("late", ~early_mask)):
                    if not mask.any():
                        continue
                    rows = batch.filter(pa.array(mask))
                    ids = rows.column("request_id").to_numpy().astype(np.int64)
                    counts[part] += sampling.requests_in(ids, last[part])
                    last[part] = int(ids[-1])
                    if part not in writers:
                        writers[part] = pq.ParquetWriter(tmp[part], rows.schema, compression="zstd")
                    writers[part].write_batch(rows)
        for part in ("early", "late"):
            if part not in writers:  # an empty part still gets a file with the trace's columns
                schema = pq.ParquetFile(files[0]).schema_arrow
                writers[part] = pq.ParquetWriter(tmp[part], schema, compression="zstd")
        for w in writers.values():
            w.close()
        os.replace(tmp["early"], early)
        os.replace(tmp["late"], late)
        meta.write_text(json.dumps(counts))
    finally:
        for t in tmp.values():
            t.unlink(missing_ok=True)
    return early, late, counts
