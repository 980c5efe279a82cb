"""Errors shared by every part of tailtune. The CLI maps them to one clear line and an exit code."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "BadInputError",
    "InputProblem",
    "NotFoundError",
    "TailtuneError",
]


class TailtuneError(Exception):
    """Base of all expected errors: shown to the user as one line, no traceback (unless --debug)."""

    exit_code: int = 1
    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class InputProblem:
    """One problem in one place of an input file: rendered as `FILE:LINE: field 'x': problem`."""

    file: str
    line: int | None
    field: str | None
    problem: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        if self.field is not None:
            return f"{where}: field '{self.field}': {self.problem}"
        return f"{where}: {self.problem}"


class BadInputError(TailtuneError):
    """The user's input is wrong (exit code 2). Carries every problem found, up to the error limit."""

    exit_code = 2

    def __init__(self, problems: Sequence[InputProblem], *, hint: str | None = None, more: int = 0) -> None:
        if not problems:
            raise ValueError("BadInputError needs at least one problem")
        self.problems = list(problems)
        self.more = more
        lines = [str(p) for p in self.problems]
        if more:
            lines.append(f"... and {more} more problem(s)")
        super().__init__("\n".join(lines), hint=hint)

    @classmethod
    def single(
        cls, file: str, problem: str, *, line: int | None = None, field: str | None = None, hint: str | None = None
    ) -> BadInputError:
        return cls([InputProblem(file, line, field, problem)], hint=hint)


class NotFoundError(TailtuneError):
    """A named thing (dataset, study, ...) does not exist (exit code 3)."""

    exit_code = 3
