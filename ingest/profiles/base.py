"""The small base every generator profile implements: typed options, and the components built from them.

A profile is (request sizes, key popularity, value sizes, and optionally its own arrival process and key
drift): `Profile.build()` returns the models for the options given. Options are a frozen dataclass per
profile; `--option k=v` strings and Python keyword values are coerced to the declared field types and
checked; every problem is reported as `--option: field 'k': ...`.
"""

from __future__ import annotations

import dataclasses
import typing
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Self, TypeVar

from base.errors import BadInputError, InputProblem
from ingest.profiles.popularity import KeyPopularity
from ingest.profiles.sizes import RequestSizes
from ingest.profiles.timing import Arrivals, KeyDrift, PoissonArrivals
from ingest.profiles.values import ValueSizes

__all__ = ["OPTION_SOURCE", "Components", "Profile", "ProfileOptions"]

#: The "file" part of option errors: `--option: field 'mice': expected an integer, got "x"`.
OPTION_SOURCE = "--option"


@dataclass(frozen=True, slots=True)
class Components:
    """What a profile draws from: how many keys per request, which keys, and how large their values are; when
    requests arrive (stationary Poisson unless the profile says otherwise) and whether the hot keys drift."""

    sizes: RequestSizes
    keys: KeyPopularity
    values: ValueSizes
    arrivals: Arrivals = field(default_factory=PoissonArrivals)
    drift: KeyDrift | None = None


@dataclass(frozen=True)
class ProfileOptions:
    """Base of each profile's options dataclass (fields of type int, float or str, all with defaults)."""

    def problems(self) -> list[tuple[str, str]]:
        """(field, problem) for every invalid value; empty when the options are usable."""
        return []

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def parse(cls, raw: Mapping[str, object], *, profile: str) -> Self:
        """Coerce raw values (strings from the CLI or typed values from Python) and validate them."""
        hints = typing.get_type_hints(cls)
        known = cls.names()
        problems: list[InputProblem] = []
        values: dict[str, Any] = {}
        for name, value in raw.items():
            if name not in known:
                valid = ", ".join(known) or "none"
                problems.append(
                    InputProblem(OPTION_SOURCE, None, name, f"unknown option for profile '{profile}' (valid: {valid})")
                )
                continue
            try:
                values[name] = _coerce(value, hints[name])
            except ValueError as exc:
                problems.append(InputProblem(OPTION_SOURCE, None, name, str(exc)))
        if problems:
            raise BadInputError(problems)
        options = cls(**values)
        bad = options.problems()
        if bad:
            raise BadInputError([InputProblem(OPTION_SOURCE, None, f, p) for f, p in bad])
        return options


def _coerce(value: object, kind: Any) -> object:
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ValueError(f"expected an integer, got {value!r}")
        try:
            return int(str(value).replace("_", ""))
        except ValueError:
            raise ValueError(f'expected an integer, got "{value}"') from None
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError(f"expected a number, got {value!r}")
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f'expected a number, got "{value}"') from None
        if number != number or number in (float("inf"), float("-inf")):
            raise ValueError(f'expected a finite number, got "{value}"')
        return number
    if kind is str:
        return str(value)
    raise TypeError(f"unsupported option type {kind!r}")  # a programming error in a profile


OptionsT = TypeVar("OptionsT", bound=ProfileOptions)


class Profile(ABC, Generic[OptionsT]):
    """One generator profile. Subclasses set the class attributes and implement `build()`."""

    name: ClassVar[str]
    title: ClassVar[str]  # one line, shown by `tailtune generate --help` and in docs
    source: ClassVar[str]  # where the shape comes from (paper and section)
    options_type: ClassVar[type[ProfileOptions]]

    def __init__(self, options: OptionsT) -> None:
        self.options = options
        self.components = self.build(options)

    @classmethod
    def from_options(cls, raw: Mapping[str, object] | None = None) -> Profile[Any]:
        options = cls.options_type.parse(raw or {}, profile=cls.name)
        return cls(options)  # type: ignore[arg-type]

    @abstractmethod
    def build(self, options: OptionsT) -> Components:
        """The three models for these (already validated) options."""

    def expected(self) -> dict[str, float]:
        """Exact model values of the statistics `tailtune generate` measures (for docs, tests and --json)."""
        sizes = self.components.sizes
        return {
            "mean_size": sizes.mean(),
            "multi_key_fraction": sizes.multi_fraction(),
            "max_size": float(sizes.max_size),
        }
