"""Where a study's workload comes from: a stored dataset, a trace file or a generator profile (JSON-able)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tailtune.base.errors import BadInputError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["WorkloadSource"]


@dataclass(frozen=True, slots=True)
class WorkloadSource:
    """Exactly one of `dataset` (id or name), `trace` (file path) or `profile` (+ `requests`, `trace_seed`)."""

    dataset: str | None = None
    trace: str | None = None
    profile: str | None = None
    requests: int | None = None
    trace_seed: int = 1

    def __post_init__(self) -> None:
        given = [x for x in (self.dataset, self.trace, self.profile) if x is not None]
        if len(given) != 1:
            raise BadInputError.single("command line", "give exactly one of --dataset ID, FILE or --profile P")
        if self.profile is not None and (self.requests is None or self.requests < 1):
            raise BadInputError.single("command line", "a profile needs --requests N (N >= 1)", field="requests")

    @property
    def label(self) -> str:
        if self.dataset is not None:
            return f"dataset:{self.dataset}"
        if self.trace is not None:
            return f"trace:{self.trace}"
        return f"profile:{self.profile}:{self.requests}:seed{self.trace_seed}"

    def load(self) -> pa.Table:
        """The canonical long-format table."""
        from tailtune.simulation.cassandra import load_table

        return load_table(
            dataset=self.dataset,
            trace=Path(self.trace) if self.trace is not None else None,
            profile=self.profile,
            requests=self.requests,
            seed=self.trace_seed,
        )

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("dataset", "trace", "profile", "requests", "trace_seed")
                if getattr(self, k) is not None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> WorkloadSource:
        return cls(**{k: d[k] for k in ("dataset", "trace", "profile", "requests", "trace_seed") if k in d})
