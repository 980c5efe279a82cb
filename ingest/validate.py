"""Row validation: typed conversion with line-precise problems, the error policy, and ordering/duplicate checks.

Every reader turns raw text columns into canonical types with the converters here; problems are reported to an
`ErrorSink`, which either fails (`--on-error fail`: up to `--max-errors` problems, then exit 2) or drops the bad
rows and counts them (`--on-error skip`). `StreamValidator` checks the canonical, id-assigned stream: order by
(ts, request_id), one ts per request, no duplicate (request_id, key) rows; it also collects the manifest counts.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from base.errors import BadInputError, InputProblem

__all__ = [
    "ErrorPolicy",
    "ErrorSink",
    "StreamStats",
    "StreamValidator",
    "UnsortedPolicy",
    "to_float",
    "to_int",
    "to_key",
    "to_text",
]

Lines = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

_INT_RE = re.compile(r"^-?[0-9]+$")


class ErrorPolicy(StrEnum):
    """What a bad row does: `fail` the ingest (exit 2) or `skip` the row (counted in the manifest)."""

    FAIL = "fail"
    SKIP = "skip"


class UnsortedPolicy(StrEnum):
    """What out-of-order timestamps do: `reject` (exit 2 at the first offending line) or `sort` (extra pass)."""

    REJECT = "reject"
    SORT = "sort"


def _show(value: Any) -> str:
    text = str(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return '"' + text.replace('"', '\\"') + '"'


class ErrorSink:
    """Collects row problems of one input file and applies the error policy.

    Readers `report` problems while converting a chunk and `flush` at the end of it: problems are then ordered
    by line, and in `fail` mode the ingest stops as soon as `max_errors` problems are known.
    """

    def __init__(self, file_label: str, *, max_errors: int = 20, policy: ErrorPolicy = ErrorPolicy.FAIL) -> None:
        self.file_label = file_label
        self.max_errors = max(1, max_errors)
        self.policy = policy
        self.problems: list[InputProblem] = []
        self.total = 0
        self.skipped_rows = 0
        self.by_field: Counter[str] = Counter()
        self._pending: list[InputProblem] = []

    def report(self, line: int | None, field: str | None, problem: str) -> None:
        self._pending.append(InputProblem(self.file_label, line, field, problem))

    def report_dropped(self, line: int | None, field: str | None, problem: str) -> None:
        """A problem with a row the parser already left out (it still counts as a skipped row)."""
        self.report(line, field, problem)
        self.skipped_rows += 1

    def report_many(self, lines: Lines, field: str, problems: Sequence[str]) -> None:
        for line, problem in zip(lines.tolist(), problems, strict=True):
            self._pending.append(InputProblem(self.file_label, int(line), field, problem))

    def fatal(
        self, line: int | None, field: str | None, problem: str, *, hint: str | None = None, file: str | None = None
    ) -> BadInputError:
        """An error that no policy skips (missing column, unsorted input, ...): raise what this returns. `file`
        names a file inside the input when it is a directory (a full query log's cycle file)."""
        self.flush(rows_dropped=0)
        where = self.file_label if file is None else file
        return BadInputError([*self.problems, InputProblem(where, line, field, problem)], hint=hint)

    def flush(self, *, rows_dropped: int) -> None:
        """End of a chunk: order its problems by line; stop when `fail` has collected enough of them."""
        pending = sorted(self._pending, key=lambda p: p.line or 0)
        self._pending = []
        self.skipped_rows += rows_dropped
        for p in pending:
            self.total += 1
            self.by_field[p.field or "row"] += 1
            if len(self.problems) < self.max_errors:
                self.problems.append(p)
        if self.policy is ErrorPolicy.FAIL and len(self.problems) >= self.max_errors:
            raise self.error()

    def error(self) -> BadInputError:
        shown = len(self.problems)
        hint = "bad rows can be dropped with --on-error skip (counted in the manifest)"
        if self.total > shown or shown >= self.max_errors:
            hint = f"stopped after {shown} problem(s) (--max-errors {self.max_errors}); " + hint
        return BadInputError(self.problems, hint=hint, more=max(0, self.total - shown))

    def finish(self) -> None:
        """End of input: in `fail` mode any problem fails the ingest."""
        self.flush(rows_dropped=0)
        if self.policy is ErrorPolicy.FAIL and self.problems:
            raise self.error()

    def absorb(self, other: ErrorSink) -> None:
        """Take the problems of `other` (the sink of one part of the input, e.g. one node's log) as this one's;
        in `fail` mode they fail the ingest at `finish`."""
        other.flush(rows_dropped=0)
        self.total += other.total
        self.skipped_rows += other.skipped_rows
        self.by_field.update(other.by_field)
        self.problems += other.problems[: max(0, self.max_errors - len(self.problems))]

    def summary(self) -> dict[str, Any]:
        return {
            "policy": self.policy.value,
            "skipped_rows": self.skipped_rows,
            "problems": self.total,
            "by_field": dict(sorted(self.by_field.items())),
            "examples": [str(p) for p in self.problems],
        }


# --------------------------------------------------------------------------------------------- converters


def to_text(raw: pa.Array, field: str | None, lines: Lines, sink: ErrorSink) -> tuple[pa.Array, Mask]:
    """Binary (or string) values → UTF-8 strings; invalid UTF-8 is a problem on its line."""
    if pa.types.is_string(raw.type) or pa.types.is_large_string(raw.type):
        return raw.cast(pa.string()), np.zeros(len(raw), dtype=np.bool_)
    try:
        return raw.cast(pa.string()), np.zeros(len(raw), dtype=np.bool_)
    except (pa.ArrowInvalid, UnicodeDecodeError):
        pass
    bad = np.zeros(len(raw), dtype=np.bool_)
    values: list[str | None] = []
    for i, v in enumerate(raw.to_pylist()):
        if v is None:
            values.append(None)
            continue
        try:
            values.append(v.decode("utf-8"))
        except UnicodeDecodeError as exc:
            bad[i] = True
            values.append(None)
            sink.report(int(lines[i]), field, f"invalid UTF-8 (byte 0x{v[exc.start]:02x} at offset {exc.start})")
    return pa.array(values, type=pa.string()), bad


def _blank(text: pa.Array) -> Mask:
    filled = pc.fill_null(pc.equal(pc.utf8_trim_whitespace(text), ""), True)
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.bool_)


def to_key(raw: pa.Array, field: str, lines: Lines, sink: ErrorSink) -> tuple[pa.Array, Mask]:
    """A required non-empty string (the key)."""
    text, bad = to_text(raw, field, lines, sink)
    empty = _blank(text) & ~bad
    if empty.any():
        sink.report_many(lines[empty], field, ["missing value"] * int(empty.sum()))
    return text, bad | empty


def to_int(
    raw: pa.Array, field: str, lines: Lines, sink: ErrorSink, *, required: bool = False, scale: int = 1
) -> tuple[pa.Array, Mask]:
    """Non-negative integers; blank → null unless `required`. Floats with an integral value are accepted."""
    n = len(raw)
    if pa.types.is_integer(raw.type) or pa.types.is_floating(raw.type) or pa.types.is_null(raw.type):
        values = raw
        bad = np.zeros(n, dtype=np.bool_)
        if pa.types.is_floating(raw.type):
            f = np.asarray(raw.to_numpy(zero_copy_only=False), dtype=np.float64)
            valid = np.asarray(raw.is_valid().to_numpy(zero_copy_only=False), dtype=np.bool_)
            bad = valid & ~(np.isfinite(f) & (np.floor(f) == f))
            if bad.any():
                sink.report_many(lines[bad], field, [f"expected non-negative integer, got {_show(v)}" for v in f[bad]])
            values = pa.array(np.where(bad, 0, np.nan_to_num(f)).astype(np.int64), mask=~valid | bad)
        values = values.cast(pa.int64())
    else:
        text, bad = to_text(raw, field, lines, sink)
        try:  # fast path: clean integers (a blank or malformed value makes the cast fail)
            values = text.cast(pa.int64())
            blank = np.asarray(text.is_null().to_numpy(zero_copy_only=False), dtype=np.bool_)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            blank = _blank(text)
            out: list[int | None] = []
            for i, v in enumerate(text.to_pylist()):
                v = v.strip() if v is not None else None
                if not v or bad[i]:
                    out.append(None)
                    continue
                # length first: int() of a string over 4300 digits raises ValueError (and would be slow)
                if len(v) <= 20 and _INT_RE.match(v) and -(2**63) <= int(v) < 2**63:
                    out.append(int(v))
                    continue
                out.append(None)
                bad[i] = True
                sink.report(int(lines[i]), field, f"expected non-negative integer, got {_show(v)}")
            values = pa.array(out, type=pa.int64())
        if required:
            missing = blank & ~bad
            if missing.any():
                sink.report_many(lines[missing], field, ["missing value"] * int(missing.sum()))
                bad = bad | missing
    neg = np.asarray(pc.fill_null(pc.less(values, 0), False).to_numpy(zero_copy_only=False), dtype=np.bool_) & ~bad
    if neg.any():
        got = values.filter(pa.array(neg)).to_pylist()
        sink.report_many(lines[neg], field, [f"expected non-negative integer, got {_show(v)}" for v in got])
        bad = bad | neg
    if scale != 1:
        values = pc.multiply(values, scale)
    return values, bad


def to_float(
    raw: pa.Array,
    field: str,
    lines: Lines,
    sink: ErrorSink,
    *,
    required: bool = False,
    non_negative: bool = False,
    scale: float = 1.0,
) -> tuple[pa.Array, Mask]:
    """Finite floats (blank → null unless `required`); `non_negative` rejects values below zero."""
    n = len(raw)
    bad = np.zeros(n, dtype=np.bool_)
    text: pa.Array | None = None
    if pa.types.is_integer(raw.type) or pa.types.is_floating(raw.type) or pa.types.is_null(raw.type):
        values = raw.cast(pa.float64())
        blank = np.asarray(raw.is_null().to_numpy(zero_copy_only=False), dtype=np.bool_)
    else:
        text, bad = to_text(raw, field, lines, sink)
        try:  # fast path: clean numbers (a blank or malformed value makes the cast fail)
            values = text.cast(pa.float64())
            blank = np.asarray(text.is_null().to_numpy(zero_copy_only=False), dtype=np.bool_)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            blank = _blank(text)
            text = pc.if_else(pa.array(blank), pa.scalar(None, pa.string()), pc.utf8_trim_whitespace(text))
            pylist = text.to_pylist()
            out = np.zeros(n, dtype=np.float64)
            for i, v in enumerate(pylist):
                if v is None or bad[i]:
                    continue
                try:
                    out[i] = float(v)
                except ValueError:
                    bad[i] = True
                    sink.report(int(lines[i]), field, f"expected a number, got {_show(v)}")
            values = pa.array(out, mask=blank | bad)
    f = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64)
    valid = ~blank & ~bad
    wrong = valid & ~np.isfinite(f)
    if non_negative:
        wrong |= valid & np.isfinite(f) & (f < 0)
    if wrong.any():
        shown = text.to_pylist() if text is not None else f.tolist()
        want = "a finite non-negative number" if non_negative else "a finite number"
        idx = np.flatnonzero(wrong)
        sink.report_many(lines[idx], field, [f"expected {want}, got {_show(shown[i])}" for i in idx])
        bad = bad | wrong
    if required:
        missing = blank & ~bad
        if missing.any():
            sink.report_many(lines[missing], field, ["missing value"] * int(missing.sum()))
            bad = bad | missing
    if scale != 1.0:
        values = pc.multiply(values, scale)
    return values, bad


# ------------------------------------------------------------------------------------------ stream checks

_P = np.uint64(1099511628211)


def fingerprint(keys: pa.Array) -> npt.NDArray[np.uint64]:
    """A 64-bit polynomial hash of each string, vectorized (equal strings → equal values; a filter only)."""
    arr = keys.cast(pa.string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset : arr.offset + n + 1].astype(np.int64)
    lens = np.diff(offsets)
    start, end = int(offsets[0]), int(offsets[-1])
    h = lens.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F)
    if end == start:
        return h
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[start:end].astype(np.uint64)
    pos = np.arange(end - start, dtype=np.int64) - np.repeat(offsets[:-1] - start, lens)
    powers = np.cumprod(np.full(int(lens.max()), _P, dtype=np.uint64))
    nonempty = lens > 0
    with np.errstate(over="ignore"):
        sums = np.add.reduceat(data * powers[pos], (offsets[:-1] - start)[nonempty])
    h[nonempty] ^= sums
    return h


@dataclass
class StreamStats:
    """Counts gathered while the canonical stream goes by."""

    rows: int = 0
    requests: int = 0
    ts_min: float | None = None
    ts_max: float | None = None
    value_size_known: int = 0
    latency_known: int = 0
    max_request_rows: int = 0
    #: exact count of distinct request ids and (64-bit fingerprinted) keys; None past `SET_LIMIT` entries
    distinct_requests: int | None = 0
    distinct_keys: int | None = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _sorted_unique(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Sorted distinct values (sort-based: numpy's hash-based unique is slow on large integer arrays)."""
    a = np.sort(a)
    if len(a) < 2:
        return a
    keep = np.empty(len(a), dtype=np.bool_)
    keep[0] = True
    keep[1:] = a[1:] != a[:-1]
    return a[keep]


def _merge_sorted(seen: npt.NDArray[Any], new: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Union of two sorted distinct arrays, in linear time."""
    if len(seen) and len(new):
        pos = np.minimum(np.searchsorted(seen, new), len(seen) - 1)
        new = new[seen[pos] != new]
    return np.insert(seen, np.searchsorted(seen, new), new) if len(new) else seen


#: Entries kept per in-memory distinct set (8 bytes each); past it the caller counts with DuckDB instead.
SET_LIMIT = 32_000_000


class StreamValidator:
    """Checks a canonical stream with request ids, chunk by chunk, in bounded memory.

    Rules: rows are ordered by (ts, request_id); the rows of one request are contiguous and share one ts;
    a (request_id, key) pair occurs once. Out-of-order rows are fatal (the caller chose `reject`, or sorted);
    a second ts within a request and duplicate pairs are row problems (the later row is the bad one).
    """

    def __init__(self, sink: ErrorSink, *, unsorted_hint: str | None = None) -> None:
        self.sink = sink
        self.stats = StreamStats()
        self.unsorted_hint = unsorted_hint
        self._prev: tuple[float, int, int] | None = None  # ts, request_id, line of the last kept row
        self._run_keys: set[str] = set()  # keys of the last (possibly unfinished) request
        self._run_len = 0
        self._seen_ids: npt.NDArray[np.int64] | None = np.zeros(0, dtype=np.int64)  # sorted, unique
        self._seen_keys: npt.NDArray[np.uint64] | None = np.zeros(0, dtype=np.uint64)  # sorted, unique

    def check(self, batch: pa.RecordBatch, lines: Lines) -> tuple[pa.RecordBatch, Lines]:
        n = batch.num_rows
        if n == 0:
            return batch, lines
        ts = np.asarray(batch.column("ts").to_numpy(zero_copy_only=False), dtype=np.float64)
        rid = np.asarray(batch.column("request_id").to_numpy(zero_copy_only=False), dtype=np.int64)
        pts = np.empty(n, dtype=np.float64)
        prid = np.empty(n, dtype=np.int64)
        pts[1:], prid[1:] = ts[:-1], rid[:-1]
        if self._prev is None:
            pts[0], prid[0] = ts[0], rid[0]
        else:
            pts[0], prid[0] = self._prev[0], self._prev[1]
        out_of_order = (ts < pts) | ((ts == pts) & (rid < prid))
        if out_of_order.any():
            i = int(np.flatnonzero(out_of_order)[0])
            prev_line = int(lines[i - 1]) if i > 0 else (self._prev[2] if self._prev else 0)
            what = (
                f"not sorted: ts {float(ts[i])!r} comes after ts {float(pts[i])!r} (line {prev_line})"
                if ts[i] < pts[i]
                else f"not sorted: request {rid[i]} comes after request {prid[i]} at the same ts (line {prev_line})"
            )
            raise self.sink.fatal(int(lines[i]), "ts", what, hint=self.unsorted_hint)
        same = rid == prid
        if self._prev is None:
            same[0] = False
        bad = same & (ts != pts)
        if bad.any():
            idx = np.flatnonzero(bad)
            self.sink.report_many(
                lines[idx],
                "ts",
                [f"request {rid[i]} already has ts {float(pts[i])!r}; rows of one request share one ts" for i in idx],
            )
        keys = batch.column("key")
        fp = fingerprint(keys)
        dup = self._duplicates(rid, keys, same, fp)
        if dup.any():
            idx = np.flatnonzero(dup & ~bad)
            kl = keys.to_pylist()
            self.sink.report_many(
                lines[idx], "key", [f"duplicate (request_id, key) = ({rid[i]}, {_show(kl[i])})" for i in idx]
            )
        drop = bad | dup
        self.sink.flush(rows_dropped=int(drop.sum()))
        if drop.any():
            keep = ~drop
            batch = batch.filter(pa.array(keep))
            lines = lines[keep]
            ts, rid, fp = ts[keep], rid[keep], fp[keep]
            if batch.num_rows == 0:
                return batch, lines
        self._account(batch, ts, rid, lines, fp)
        return batch, lines

    def _duplicates(self, rid: npt.NDArray[np.int64], keys: pa.Array, same: Mask, fp: npt.NDArray[np.uint64]) -> Mask:
        n = len(rid)
        dup = np.zeros(n, dtype=np.bool_)
        # rows continuing the request left open by the previous chunk
        head = int(np.argmin(same)) if not same.all() else n
        if head and self._run_keys:
            for i, k in enumerate(keys.slice(0, head).to_pylist()):
                if k in self._run_keys:
                    dup[i] = True
        # fast check: are the (request run within the chunk, key fingerprint) pairs all distinct? Rows of a
        # request are contiguous here (out-of-order rows were rejected before), so the run stands for the id.
        run = np.cumsum(~same).astype(np.uint64)
        pairs = fp ^ (run * np.uint64(0x9E3779B97F4A7C15))
        pairs.sort()
        if not (pairs[1:] == pairs[:-1]).any():
            return dup
        seen: set[tuple[int, str]] = set()
        for i, (r, k) in enumerate(zip(rid.tolist(), keys.to_pylist(), strict=True)):
            if (r, k) in seen:
                dup[i] = True
            else:
                seen.add((r, k))
        return dup

    def _account(
        self,
        batch: pa.RecordBatch,
        ts: npt.NDArray[np.float64],
        rid: npt.NDArray[np.int64],
        lines: Lines,
        fp: npt.NDArray[np.uint64],
    ) -> None:
        n = len(rid)
        st = self.stats
        starts = np.empty(n, dtype=np.bool_)
        starts[1:] = rid[1:] != rid[:-1]
        starts[0] = self._prev is None or rid[0] != self._prev[1]
        self._track_distinct(rid[starts], lines[starts], fp)
        st.rows += n
        st.requests += int(starts.sum())
        st.ts_min = float(ts[0]) if st.ts_min is None else st.ts_min
        st.ts_max = float(ts[-1])
        st.value_size_known += n - batch.column("value_size").null_count
        if "latency_us" in batch.schema.names:
            st.latency_known += n - batch.column("latency_us").null_count
        # run lengths (requests sizes), carrying the open request across chunks
        idx = np.flatnonzero(starts)
        bounds = np.append(idx, n)
        sizes = np.diff(bounds)
        if len(idx) == 0 or idx[0] > 0:
            first = (int(idx[0]) if len(idx) else n) + self._run_len
            st.max_request_rows = max(st.max_request_rows, first)
        if len(sizes):
            st.max_request_rows = max(st.max_request_rows, int(sizes.max()))
        last_start = int(idx[-1]) if len(idx) else 0
        tail = batch.column("key").slice(last_start).to_pylist()
        if len(idx):
            self._run_keys = set(tail)
            self._run_len = n - last_start
        else:
            self._run_keys.update(tail)
            self._run_len += n
        self._prev = (float(ts[-1]), int(rid[-1]), int(lines[-1]))

    def _track_distinct(self, new_ids: npt.NDArray[np.int64], id_lines: Lines, fp: npt.NDArray[np.uint64]) -> None:
        """Exact distinct request ids (a reappearing id is fatal: requests are contiguous) and distinct keys."""
        st = self.stats
        if self._seen_ids is not None:
            order = np.argsort(new_ids, kind="stable")
            sorted_ids = new_ids[order]
            again = np.zeros(len(new_ids), dtype=np.bool_)
            again[order[1:]] = sorted_ids[1:] == sorted_ids[:-1]
            if len(self._seen_ids):
                pos = np.minimum(np.searchsorted(self._seen_ids, new_ids), len(self._seen_ids) - 1)
                again |= self._seen_ids[pos] == new_ids
            if again.any():
                i = int(np.flatnonzero(again)[0])
                raise self.sink.fatal(
                    int(id_lines[i]),
                    "request_id",
                    f"request {int(new_ids[i])} appears again after other requests; "
                    "the rows of a request must be contiguous",
                )
            self._seen_ids = _merge_sorted(self._seen_ids, _sorted_unique(new_ids))
            st.distinct_requests = len(self._seen_ids)
            if len(self._seen_ids) > SET_LIMIT:
                self._seen_ids, st.distinct_requests = None, None
        if self._seen_keys is not None:
            self._seen_keys = _merge_sorted(self._seen_keys, _sorted_unique(fp))
            st.distinct_keys = len(self._seen_keys)
            if len(self._seen_keys) > SET_LIMIT:
                self._seen_keys, st.distinct_keys = None, None
