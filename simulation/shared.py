"""A host-wide store of workload arrays in memory-mapped files, so that every process replaying one trace on one
deployment (the tuner's coordinator and its workers) holds one copy of it between them instead of one each.

A store is a directory named by a digest of what its arrays are made from (`store_key`). It holds groups — one
subdirectory each (`trace`, `layout`, `seed-0`, ...) of `.npy` files and a `meta.json` — written whole under a
temporary name and renamed into place, so a group is either absent or complete; two processes writing the same
group at once both succeed and one copy is kept. Arrays are read back memory-mapped read-only: the pages are
the kernel's page cache, shared by every process that maps them (they count in each process's RSS, once in
the sum of PSS, and not in any process's USS).

The process that creates the directory removes it when its `WorkloadStore` is collected or at exit; a process
still mapping the files keeps reading them (an unlinked file stays mapped). What a killed process leaves is an
unowned entry of `TAILTUNE_HOME/tmp/`, removed by the start-up sweep (`control.scratch`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import uuid
import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["FORMAT", "WorkloadStore", "release_pages", "store_key"]

#: Version of the store's layout on disk (part of the key).
FORMAT = 1


def store_key(doc: Mapping[str, Any]) -> str:
    """A short digest of a JSON-able description of what the arrays are made from."""
    text = json.dumps({"format": FORMAT, **doc}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def release_pages(arrays: Iterable[npt.NDArray[Any]]) -> int:
    """Drops the pages of memory-mapped store arrays from this process's resident set (`MADV_DONTNEED` on the
    read-only shared file mappings): the data stay in the page cache, and the next read maps them back without
    I/O. A process that replays one seed after another so holds one seed's draws at a time instead of every
    seed's. Arrays that are not mapped files are left alone. Returns the bytes of the mappings released."""
    import mmap

    released = 0
    for a in arrays:
        m = getattr(a, "_mmap", None)  # np.memmap's mapping (np.load(mmap_mode="r") makes one per file)
        if isinstance(m, mmap.mmap) and hasattr(m, "madvise"):
            try:
                m.madvise(mmap.MADV_DONTNEED)
            except (OSError, ValueError):  # closed, or a platform without it: the pages just stay
                continue
            released += len(m)
    return released


class WorkloadStore:
    """The groups of arrays under `directory` (created on the first write)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._finalizer: weakref.finalize[[str, bool], WorkloadStore] | None = None

    @classmethod
    def under(cls, parent: Path, doc: Mapping[str, Any]) -> WorkloadStore:
        """The store of `doc` (see `store_key`) in `parent`."""
        return cls(Path(parent) / f"workloads-{store_key(doc)}")

    @property
    def owner(self) -> bool:
        """This process created the directory (and removes it)."""
        return self._finalizer is not None and self._finalizer.alive

    def has(self, group: str) -> bool:
        return (self.directory / group / "meta.json").is_file()

    def meta(self, group: str) -> dict[str, Any] | None:
        """The group's metadata, or None when the group is absent."""
        try:
            doc: dict[str, Any] = json.loads((self.directory / group / "meta.json").read_text())
        except (OSError, ValueError):
            return None
        return doc

    def arrays(self, group: str) -> dict[str, npt.NDArray[Any]] | None:
        """The group's arrays, memory-mapped read-only (None when the group is absent)."""
        meta = self.meta(group)
        if meta is None:
            return None
        d = self.directory / group
        try:
            return {name: np.load(d / f"{name}.npy", mmap_mode="r", allow_pickle=False) for name in meta["arrays"]}
        except (OSError, ValueError):
            return None

    def save(
        self, group: str, arrays: Mapping[str, npt.NDArray[Any]], meta: Mapping[str, Any] | None = None
    ) -> dict[str, npt.NDArray[Any]]:
        """Writes the group (unless another process did) and returns its arrays memory-mapped."""
        if not self.has(group):
            self._claim()
            tmp = self.directory / f".{group}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
            tmp.mkdir()
            try:
                for name, a in arrays.items():
                    arr = np.asarray(a)
                    np.save(tmp / f"{name}.npy", np.ascontiguousarray(arr), allow_pickle=False)
                doc = {"arrays": list(arrays), **(meta or {})}
                (tmp / "meta.json").write_text(json.dumps(doc))
                # another process may have put the group in place first: then theirs is kept
                with contextlib.suppress(OSError):
                    tmp.rename(self.directory / group)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        out = self.arrays(group)
        if out is None:
            raise OSError(f"workload store {self.directory}: group {group!r} could not be read back")
        return out

    def nbytes(self) -> int:
        """Bytes of every file in the store."""
        if not self.directory.is_dir():
            return 0
        return sum(p.stat().st_size for p in self.directory.rglob("*.npy"))

    def keep(self) -> None:
        """This process no longer removes the directory (it outlives the process: benchmarks, tests)."""
        if self._finalizer is not None:
            self._finalizer.detach()

    def remove(self) -> None:
        """Deletes the directory (mapped arrays stay readable)."""
        if self._finalizer is not None:
            self._finalizer()
        else:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _claim(self) -> None:
        """Creates the directory; the creator removes it when this object is collected or at exit."""
        try:
            self.directory.mkdir(parents=True)
        except FileExistsError:
            return
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.directory), True)
