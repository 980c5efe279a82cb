"""Helpers shared by the generator tests."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc


def request_sizes(table: pa.Table) -> npt.NDArray[np.int64]:
    """Keys per request, indexed by request_id (ids are 0..N-1)."""
    return np.bincount(table.column("request_id").to_numpy()).astype(np.int64)


def key_ids(table: pa.Table) -> npt.NDArray[np.int64]:
    """The integer id of every row's key (`k<id>`)."""
    return np.asarray(pc.cast(pc.utf8_slice_codeunits(table.column("key"), 1), pa.int64()).to_numpy())
