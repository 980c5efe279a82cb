"""A stand-in for the model half of `filekv`, the deployment kind that exists only in the tests (the model half's
own module replaces this one: same names, `THIRD` and `register_third()`).

Its cluster (`tests.kinds.third_kind_ops.FileKv`, the operations half) is a directory; its model is a deployment
class of its own (`FileKvDeployment`: a pool of servers × worker threads with service-time noise).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from typing import Any

from base.errors import BadInputError
from simulation.kinds import ModelKind, register, unregister

__all__ = ["NAME", "THIRD", "FileKvDeployment", "register_third"]

NAME = "filekv"
_MODULE = "tests.kinds.third_kind_model"


@dataclass(frozen=True)
class FileKvDeployment:
    """A filekv pool: `servers` × `worker_threads`, service times with coefficient of variation `service_cv`."""

    servers: int = 2
    worker_threads: int = 4
    service_cv: float = 0.5

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FileKvDeployment:
        unknown = sorted(set(d) - {f.name for f in fields(cls)})
        if unknown:
            raise BadInputError.single("deployment", f"unknown option(s) {unknown}", field=unknown[0])
        return cls(**d)


THIRD = ModelKind(name=NAME, deployment=f"{_MODULE}:FileKvDeployment", operations="tests.kinds.third_kind_ops:FileKv")


@contextmanager
def register_third() -> Iterator[ModelKind]:
    """`THIRD` registered in `simulation.kinds` for the block; removed after it."""
    register(THIRD)
    try:
        yield THIRD
    finally:
        unregister(NAME)
