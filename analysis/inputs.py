"""Where the rows come from: a stored dataset (by id), a canonical Parquet file/folder, or a canonical CSV.

Checks happen here, before Spark starts, and fail with `FILE:LINE: field 'x': problem` (base.errors).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from base.errors import BadInputError, InputProblem, NotFoundError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from base.settings import Settings

__all__ = ["Source", "dataset_source", "file_source", "load"]

_REQUIRED = {"request_id": "integer", "ts": "number", "key": "string", "value_size": "integer"}


@dataclass(frozen=True, slots=True)
class Source:
    label: str  # dataset id or file path, for the report
    parquet: tuple[Path, ...] = ()
    csv: Path | None = None


def dataset_source(dataset_id: str, settings: Settings) -> Source:
    """The Parquet files of a stored dataset (through ingest.store)."""
    from ingest.store import DatasetStore

    files = tuple(Path(p) for p in DatasetStore(settings).get(dataset_id).parquet_files)
    if not files:
        raise NotFoundError(f"dataset {dataset_id} has no Parquet files")
    return Source(label=dataset_id, parquet=files)


def _check_parquet(files: tuple[Path, ...]) -> None:
    import pyarrow.parquet as pq

    for f in files:
        try:
            names = set(pq.read_schema(f).names)
        except Exception as exc:
            raise BadInputError.single(str(f), f"not a readable Parquet file ({exc})") from exc
        missing = [c for c in _REQUIRED if c not in names]
        if missing:
            raise BadInputError([InputProblem(str(f), None, c, "required column is missing")
                                 for c in missing])


def _check_csv(path: Path) -> None:
    """Header must name the required columns; every row must parse (first problems reported, by line)."""
    problems: list[InputProblem] = []
    more = 0
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        missing = [c for c in _REQUIRED if c not in header]
        if missing:
            raise BadInputError([InputProblem(str(path), 1, c, "required column is missing from the header")
                                 for c in missing])
        for row in reader:
            line = reader.line_num
            for name, kind in _REQUIRED.items():
                value = (row.get(name) or "").strip()
                problem = _field_problem(value, kind, nullable=name == "value_size")
                if problem is None:
                    continue
                if len(problems) < 20:
                    problems.append(InputProblem(str(path), line, name, problem))
                else:
                    more += 1
    if problems:
        raise BadInputError(problems, more=more)


def _field_problem(value: str, kind: str, *, nullable: bool) -> str | None:
    if value == "":
        return None if nullable else "empty value"
    try:
        if kind == "integer":
            int(value)
        elif kind == "number" and not math.isfinite(float(value)):
            return f"not a finite number: {value!r}"
    except ValueError:
        return f"not an {kind}: {value!r}" if kind == "integer" else f"not a number: {value!r}"
    return None


def file_source(path: Path) -> Source:
    """A canonical Parquet file (or folder of them) or a canonical CSV file with a header row."""
    if not path.exists():
        raise NotFoundError(f"{path}: no such file or directory")
    if path.is_dir():
        files = tuple(sorted(path.glob("*.parquet")))
        if not files:
            raise BadInputError.single(str(path), "folder holds no .parquet files")
        _check_parquet(files)
        return Source(label=str(path), parquet=files)
    if path.suffix.lower() == ".csv":
        _check_csv(path)
        return Source(label=str(path), csv=path)
    _check_parquet((path,))
    return Source(label=str(path), parquet=(path,))


def load(spark: SparkSession, src: Source) -> DataFrame:
    """The rows of `src` as a Spark DataFrame (canonical column names; types normalized later)."""
    if src.csv is not None:
        return spark.read.csv(str(src.csv.resolve()), header=True, inferSchema=False)
    return spark.read.parquet(*[str(p.resolve()) for p in src.parquet])
