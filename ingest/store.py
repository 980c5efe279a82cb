"""The dataset registry: `TAILTUNE_HOME/datasets/<id>/` with `manifest.json` and `part-NNNNN.parquet` files."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from base.errors import NotFoundError, TailtuneError
from base.settings import Settings, get_settings

__all__ = ["MANIFEST", "DatasetInfo", "DatasetStore", "read_parquet"]

MANIFEST = "manifest.json"


def read_parquet(path: Path, columns: list[str] | None = None) -> pa.Table:
    """A Parquet file (or a directory of Parquet parts) as one table. A file is read by its own reader, which
    spares the process the import of `pyarrow.dataset` (and through it pandas) that `pq.read_table` pays."""
    import pyarrow.parquet as pq

    if path.is_dir():
        return pq.read_table(path, columns=columns)
    with pq.ParquetFile(path) as parquet:
        return parquet.read(columns=columns)


@dataclass(frozen=True)
class DatasetInfo:
    """One stored dataset: its id, name, directory, manifest and Parquet part files."""

    id: str
    name: str
    path: Path
    manifest: dict[str, Any] = field(repr=False)
    parquet_files: list[Path] = field(repr=False)
    #: True when `ingest_file` found this dataset already ingested (same bytes, same options).
    reused: bool = field(default=False, compare=False)

    @classmethod
    def load(cls, path: Path) -> DatasetInfo:
        manifest = json.loads((path / MANIFEST).read_text())
        return cls(
            id=str(manifest["id"]),
            name=str(manifest.get("name", manifest["id"])),
            path=path,
            manifest=manifest,
            parquet_files=sorted(path.glob("part-*.parquet")),
        )

    def read_table(self, columns: list[str] | None = None) -> pa.Table:
        """The whole dataset (or some columns) in memory — for small datasets and tests; stream otherwise."""
        tables = [read_parquet(p, columns) for p in self.parquet_files]
        return pa.concat_tables(tables) if tables else pa.table({})


class DatasetStore:
    """List, get, add and delete datasets under `settings.datasets_dir`."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or get_settings()
        self.root = self.settings.datasets_dir

    def list(self) -> list[DatasetInfo]:
        """All datasets, oldest first."""
        if not self.root.is_dir():
            return []
        out = []
        for d in self.root.iterdir():
            if (d / MANIFEST).is_file():
                try:
                    out.append(DatasetInfo.load(d))
                except (ValueError, KeyError, OSError):
                    continue
        return sorted(out, key=lambda i: (str(i.manifest.get("created_at", "")), i.id))

    def find(self, dataset_id: str) -> DatasetInfo | None:
        path = self.root / dataset_id
        return DatasetInfo.load(path) if (path / MANIFEST).is_file() else None

    def get(self, id_or_name: str) -> DatasetInfo:
        """By id, unique id prefix (4+ characters) or name (the newest dataset of that name)."""
        hint = "run `tailtune datasets` to list the datasets"
        if "/" not in id_or_name and id_or_name not in ("", ".", ".."):
            exact = self.find(id_or_name)
            if exact is not None:
                return exact
        every = self.list()
        if len(id_or_name) >= 4:
            by_prefix = [d for d in every if d.id.startswith(id_or_name)]
            if len(by_prefix) == 1:
                return by_prefix[0]
            if len(by_prefix) > 1:
                ids = ", ".join(d.id for d in by_prefix)
                raise TailtuneError(f"dataset id prefix '{id_or_name}' is ambiguous: {ids}", hint=hint)
        by_name = [d for d in every if d.name == id_or_name]
        if by_name:
            return by_name[-1]
        raise NotFoundError(f"no dataset '{id_or_name}' in {self.root}", hint=hint)

    def delete(self, dataset_id: str) -> DatasetInfo:
        """Remove a dataset (by id, prefix or name); moved aside first so no half-deleted dataset is visible."""
        info = self.get(dataset_id)
        self.settings.tmp_dir.mkdir(parents=True, exist_ok=True)
        trash = self.settings.tmp_dir / f"deleted-{info.id}-{os.getpid()}"
        os.replace(info.path, trash)
        shutil.rmtree(trash, ignore_errors=True)
        return info

    def publish(self, staging: Path, manifest: dict[str, Any]) -> tuple[DatasetInfo, bool]:
        """Write the manifest into a finished staging directory and move it into place with one rename.

        Returns (info, created); created is False when a dataset with this id appeared meanwhile.
        """
        dataset_id = str(manifest["id"])
        tmp = staging / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n")
        os.replace(tmp, staging / MANIFEST)
        self.root.mkdir(parents=True, exist_ok=True)
        target = self.root / dataset_id
        try:
            os.rename(staging, target)
        except OSError:
            existing = self.find(dataset_id)
            if existing is None:
                raise
            return existing, False
        return DatasetInfo.load(target), True
