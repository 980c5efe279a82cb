"""What a nightly job and a replay job may be asked to do: their options, checked the same way at the API (422
naming the field) and by the worker before the first step (a payload written by an older version or by hand fails
at once, naming `job payload`, instead of after the Spark analysis or the replay's load).

The ranges that depend on the installation are settings: `tune_max_trials`, `tune_max_seeds`,
`tune_max_timeout_s`, `capture_max_duration_s`, `replay_max_duration_s` (docs/operations.md § Limits).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from base.settings import Settings
from control.common import MAX_ID, RequestBody
from control.errors import Invalid
from control.kind import Unsupported
from control.kinds import operations, supports
from simulation.kinds import kind_names

__all__ = [
    "ARM_NAME_PATTERN",
    "CAPTURE_SOURCES",
    "DATASET_ID_PATTERN",
    "DEFAULT_SEEDS",
    "DEFAULT_TRIALS",
    "MAX_ARMS",
    "MAX_TRACES",
    "CaptureOptions",
    "NightlyOptions",
    "ReplayOptions",
    "ReplayPayload",
    "TuneOptions",
    "check_capture",
    "check_capture_kind",
    "check_nightly",
    "check_replay",
    "check_replay_limits",
    "check_tune",
]

MAX_TRACES = 20
DATASET_ID_PATTERN = r"^[A-Za-z0-9_-]{4,64}$"


#: A nightly job's tuner options when its request names none (the API's and the console's "Run now" default).
DEFAULT_TRIALS = 50
DEFAULT_SEEDS = 3


class TuneOptions(RequestBody):
    """The tuner's options of a nightly job (unknown names are refused: a typo must not be ignored)."""

    trials: int = Field(default=DEFAULT_TRIALS, ge=1, description="Optuna trials (at most tune_max_trials).")
    seeds: int = Field(default=DEFAULT_SEEDS, ge=1, description="Seeds per trial (at most tune_max_seeds).")
    timeout_s: Annotated[float, Field(gt=0)] | None = Field(
        default=None, description="Wall-clock budget of the study, seconds (at most tune_max_timeout_s)."
    )


#: Where a nightly's capture comes from: the kind's own capture of its servers (`watch`: memcached's watch log;
#: `fql`: a full query log — `DeploymentKind.capture_source`) or the application's clients (`clients`: the
#: `tailtune-client` traces they upload, `jobs/capture.py`).
CAPTURE_SOURCES = ("watch", "fql", "clients")
CaptureSource = Literal["watch", "fql", "clients"]


class CaptureOptions(RequestBody):
    """Take the nightly job's trace from a capture of the deployment instead of an upload: of its servers
    (`watch`, `fql`) or of the requests its application's clients upload (`clients`)."""

    source: CaptureSource = Field(
        default="watch",
        description="watch: the servers' watch log (memcached); fql: a full query log; clients: the "
                    "tailtune-client traces the application's clients upload during the capture.",
    )
    duration_s: float = Field(
        gt=0, description="How long the capture lasts, seconds (at most capture_max_duration_s)."
    )


class NightlyOptions(BaseModel):
    """A nightly job's payload."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    traces: Annotated[int, Field(strict=True, ge=1, le=MAX_TRACES)] = 1
    dataset_ids: list[Annotated[str, Field(pattern=DATASET_ID_PATTERN)]] | None = Field(
        default=None, max_length=MAX_TRACES
    )
    publish: bool = True
    tune: TuneOptions = Field(default_factory=TuneOptions)
    #: re-tune even when the workload has not moved since the running config's study (docs/drift.md)
    force: Annotated[bool, Field(strict=True)] = False
    capture: CaptureOptions | None = None


def _limits(opts: TuneOptions, settings: Settings, prefix: str) -> None:
    for name, value, limit, setting in (
        ("trials", opts.trials, settings.tune_max_trials, "tune_max_trials"),
        ("seeds", opts.seeds, settings.tune_max_seeds, "tune_max_seeds"),
        ("timeout_s", opts.timeout_s, settings.tune_max_timeout_s, "tune_max_timeout_s"),
    ):
        if value is not None and value > limit:
            raise Invalid(f"must be at most {limit:g} ({setting})", field=f"{prefix}{name}")


def check_tune(opts: TuneOptions, settings: Settings, prefix: str = "tune.") -> TuneOptions:
    """The installation's limits on a parsed TuneOptions (Invalid naming the field)."""
    _limits(opts, settings, prefix)
    return opts


def check_capture(
    capture: CaptureOptions | None, settings: Settings, *, dataset_ids: list[str] | None = None
) -> CaptureOptions | None:
    """The installation's limit on a capture's duration; a capture and explicit datasets exclude each other."""
    if capture is None:
        return None
    if dataset_ids:
        raise Invalid("a job takes its trace from a capture or from dataset_ids, not both", field="capture")
    if capture.duration_s > settings.capture_max_duration_s:
        raise Invalid(
            f"must be at most {settings.capture_max_duration_s:g} (capture_max_duration_s)", field="capture.duration_s"
        )
    return capture


def _source(capture: object) -> str:
    if isinstance(capture, CaptureOptions):
        return capture.source
    raw = capture.get("source") if isinstance(capture, Mapping) else None
    return raw if isinstance(raw, str) else "watch"


def check_capture_kind(capture: object, kind: str) -> None:
    """A capture (options or payload) of a deployment whose kind cannot be captured that way: from the servers
    (`DeploymentKind.captures`, by its `capture_source`; an unregistered name cannot) — `Unsupported`, a 422 naming
    `capture` — or from the clients (`DeploymentKind.client_captures`) — a 422 naming `capture.source`."""
    if capture is None:
        return
    source = _source(capture)
    known = kind in kind_names()
    if source == "clients":
        if not known or not operations(kind).client_captures:
            able = [k for k in kind_names() if operations(k).client_captures]
            raise Invalid(f"only a {' or '.join(able)} deployment's clients record its requests, not a {kind} "
                          "one's", field="capture.source")
        return
    if not supports(kind, "capture"):
        raise Unsupported(kind, "capture")
    own = operations(kind).capture_source
    if own != source:
        raise Invalid(f"a {kind} deployment is captured by {own} (or from its clients: clients), not by {source}",
                      field="capture.source")


def check_nightly(payload: dict[str, Any], settings: Settings) -> NightlyOptions:
    """Parse and check a stored nightly payload; Invalid naming the first bad field."""
    try:
        opts = NightlyOptions.model_validate(payload)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err.get("loc", ())) or "payload"
        raise Invalid(str(err.get("msg", "invalid")), field=field) from None
    check_tune(opts.tune, settings)
    check_capture(opts.capture, settings, dataset_ids=opts.dataset_ids)
    return opts


#: An arm's name in a replay (the generator's execution profile name; `control.replay.ARM_NAME`).
ARM_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
#: Most arms of one live replay (`control.replay.MAX_ARMS`).
MAX_ARMS = 16
_DATASET = r"^[^/\x00-\x1f]{1,200}$"


class ReplayOptions(RequestBody):
    """A live replay's options but its configs (`tailtune replay`'s, docs/replay.md): the replay job's payload
    (`ReplayPayload`) and the API's body (`service.replays.schemas.ReplayCreate`) add them."""

    dataset: str = Field(pattern=_DATASET, description="Stored dataset id, id prefix or name whose requests are sent.")
    rate_scale: float | None = Field(
        default=None, ge=1e-3, le=1e3, description="Multiply the trace's own rate (default 1); not with `load`.")
    load: float | None = Field(
        default=None, gt=0, le=10, description="Send at this fraction of the deployment's calibrated capacity.")
    duration_s: float | None = Field(
        default=None, gt=0, description="Measured seconds per repeat (default: the whole trace; all repeats "
        "together at most replay_max_duration_s).")
    repeats: int = Field(default=1, ge=1, le=100, description="Measured runs, each dealt anew.")
    block_s: float = Field(
        default=15.0, ge=0.01, le=3600, description="Seconds per block of the block bootstrap (15 or more, and "
        "20 blocks or more, to compare).")
    seed: int = Field(default=0, ge=0, le=MAX_ID, description="Seed of the dealing, the bootstrap and the model.")

    @model_validator(mode="after")
    def _one_rate(self) -> ReplayOptions:
        if self.rate_scale is not None and self.load is not None:
            raise ValueError("give rate_scale or load, not both")
        return self


def _distinct(names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"arm names must be distinct: {name!r} is given twice")
        seen.add(name)


class ReplayPayload(ReplayOptions):
    """A replay job's payload: the options and the configs as `[[name, SPEC], ...]` (the first the baseline)."""

    configs: list[Annotated[list[Annotated[str, Field(min_length=1, max_length=2000)]],
                            Field(min_length=2, max_length=2)]] = Field(min_length=2, max_length=MAX_ARMS)

    @model_validator(mode="after")
    def _arms(self) -> ReplayPayload:
        import re

        for name, _spec in self.configs:
            if not re.fullmatch(ARM_NAME_PATTERN, name):
                raise ValueError(f"arm name {name!r}: [A-Za-z0-9_-]{{1,64}}")
        _distinct([name for name, _ in self.configs])
        return self


def check_replay_limits(opts: ReplayOptions, settings: Settings) -> ReplayOptions:
    """The installation's limit on a replay's measured time (Invalid naming `duration_s`)."""
    limit = settings.replay_max_duration_s
    if opts.duration_s is not None and opts.duration_s * opts.repeats > limit:
        what = f"{opts.repeats} × {opts.duration_s:g} s" if opts.repeats > 1 else f"{opts.duration_s:g} s"
        raise Invalid(f"{what} measured: must be at most {limit:g} s in all (replay_max_duration_s)",
                      field="duration_s")
    return opts


def check_replay(payload: dict[str, Any], settings: Settings) -> ReplayPayload:
    """Parse and check a stored replay payload; Invalid naming the first bad field."""
    try:
        opts = ReplayPayload.model_validate(payload)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err.get("loc", ())) or "payload"
        raise Invalid(str(err.get("msg", "invalid")), field=field) from None
    check_replay_limits(opts, settings)
    return opts
