"""Where a replay's trace comes from: a stored dataset, a trace file or a generator profile (JSON-able, so a
recommendation records it and a worker process rebuilds it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from base.errors import BadInputError

if TYPE_CHECKING:
    import pyarrow as pa

    from base.settings import Settings

__all__ = ["WorkloadSource", "load_table"]

_KEYS = ("dataset", "trace", "profile", "requests", "trace_seed")


@dataclass(frozen=True, slots=True)
class WorkloadSource:
    """Exactly one of `dataset` (id or name), `trace` (file path) or `profile` (+ `requests`, `trace_seed`: the
    generator's seed, independent of the replay seeds)."""

    dataset: str | None = None
    trace: str | None = None
    profile: str | None = None
    requests: int | None = None
    trace_seed: int = 1

    def __post_init__(self) -> None:
        given = [x for x in (self.dataset, self.trace, self.profile) if x is not None]
        if len(given) != 1:
            raise BadInputError.single("command line", "give exactly one of --dataset ID, a trace file or --profile P")
        if self.profile is not None and (self.requests is None or self.requests < 1):
            raise BadInputError.single("--requests", "a profile needs --requests N (N >= 1)", field="requests")

    @property
    def label(self) -> str:
        if self.dataset is not None:
            return f"dataset:{self.dataset}"
        if self.trace is not None:
            return f"trace:{self.trace}"
        return f"profile:{self.profile}:{self.requests}:seed{self.trace_seed}"

    @property
    def where(self) -> str:
        """How errors name the source: the file, the dataset, or `profile:NAME`."""
        if self.trace is not None:
            return self.trace
        return self.dataset if self.dataset is not None else f"profile:{self.profile}"

    def load(self, settings: Settings | None = None) -> pa.Table:
        """The canonical long-format table."""
        return load_table(
            dataset=self.dataset,
            trace=Path(self.trace) if self.trace is not None else None,
            profile=self.profile,
            requests=self.requests,
            seed=self.trace_seed,
            settings=settings,
        )

    def has_timestamps(self, settings: Settings | None = None) -> bool:
        """Does the trace carry arrival times that span some time (a `ts` column, not all equal)? Reads only that
        column of a dataset or a Parquet trace."""
        if self.dataset is not None:
            from base.settings import get_settings
            from ingest.store import DatasetStore

            info = DatasetStore(settings or get_settings()).get(self.dataset)
            if not any("ts" in pq_schema_names(p) for p in info.parquet_files):
                return False
            ts = info.read_table(columns=["ts"]).column("ts")
        elif self.trace is not None and self.trace.endswith(".parquet"):
            from ingest.store import read_parquet

            if "ts" not in pq_schema_names(Path(self.trace)):
                return False
            ts = read_parquet(Path(self.trace), columns=["ts"]).column("ts")
        else:
            table = self.load(settings)
            if "ts" not in table.column_names:
                return False
            ts = table.column("ts")
        import pyarrow.compute as pc

        bounds = pc.min_max(ts)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        return low is not None and high is not None and high > low

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _KEYS if getattr(self, k) is not None}

    def cli_args(self) -> list[str]:
        """The `tailtune simulate` options that name this source."""
        if self.dataset is not None:
            return ["--dataset", self.dataset]
        if self.trace is not None:
            return ["--trace", self.trace]
        return ["--profile", str(self.profile), "--requests", str(self.requests), "--trace-seed", str(self.trace_seed)]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> WorkloadSource:
        return cls(**{k: d[k] for k in _KEYS if k in d})


def pq_schema_names(path: Path) -> list[str]:
    """The column names of a Parquet file (its footer only)."""
    import pyarrow.parquet as pq

    return list(pq.read_schema(path).names)


def load_table(
    *,
    dataset: str | None = None,
    trace: Path | None = None,
    profile: str | None = None,
    requests: int | None = None,
    seed: int = 0,
    settings: Settings | None = None,
) -> pa.Table:
    """The canonical long-format table of one source (exactly one of dataset / trace / profile)."""
    import pyarrow as pa

    chosen = [x for x in (dataset, trace, profile) if x is not None]
    if len(chosen) != 1:
        raise BadInputError.single("simulate", "give exactly one of --dataset, --trace, --profile")
    if dataset is not None:
        from base.settings import get_settings
        from ingest.store import DatasetStore

        return DatasetStore(settings or get_settings()).get(dataset).read_table()
    if trace is not None:
        if not trace.exists():
            raise BadInputError.single(str(trace), "file not found")
        if trace.suffix == ".parquet":
            from ingest.store import read_parquet

            try:
                return read_parquet(trace)
            except (OSError, pa.ArrowException) as exc:
                raise BadInputError.single(str(trace), f"not a readable Parquet file: {exc}") from None
        import pyarrow.csv as pcsv

        try:
            return pcsv.read_csv(trace)
        except (OSError, pa.ArrowException) as exc:
            raise BadInputError.single(str(trace), f"not a readable CSV file: {exc}") from None
    if requests is None or requests < 1:
        raise BadInputError.single("--requests", "a profile needs --requests N (N ≥ 1)", field="requests")
    from ingest import generate

    table: pa.Table = generate.generate_table(str(profile), requests, seed)
    return table
