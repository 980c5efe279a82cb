"""A hostile server posing as memcached against the capture and the `stats` reader: an endless line after the
watch's `OK`, an endless `STAT` stream. The capture ends at its line cap, its byte cap, its duration or its stop
flag (whichever comes first), with a named error where it fails; `stats` reads stay within their caps."""

from __future__ import annotations

import socket
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from base.linereader import LineCaps, LineReader, WireLimit
from kinds.memcached.capture import (
    CaptureFailed,
    CaptureLineTooLong,
    CaptureResult,
    CaptureTarget,
    capture_memcached,
    read_stats,
)
from tests.servers.hostile_memcached import HostileMemcached, hostile_memcached

BIG_LINE = 64 * 1024**2  # a line cap far above what the test sends: the other caps must end the capture


def _target(server: HostileMemcached) -> list[CaptureTarget]:
    return [CaptureTarget(server.address, server.host, server.port)]


def _run(within_s: float, **kwargs: Any) -> tuple[CaptureResult | BaseException, float]:
    """capture_memcached(**kwargs) in a thread: what it returned or raised, and when; fails the test when it is
    still running after `within_s`."""
    out: list[CaptureResult | BaseException] = []

    def go() -> None:
        try:
            out.append(capture_memcached(**kwargs))
        except BaseException as exc:
            out.append(exc)

    t0 = time.monotonic()
    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    thread.join(within_s)
    assert not thread.is_alive(), f"the capture still runs after {within_s} s"
    return out[0], time.monotonic() - t0


def test_an_endless_line_ends_the_capture_at_the_line_cap(tmp_path: Path) -> None:
    with hostile_memcached(watch="endless-line") as server:
        got, took = _run(10, targets=_target(server), out=tmp_path / "cap.log", duration_s=30, max_line=64 * 1024)
    assert isinstance(got, CaptureLineTooLong), got
    assert got.permanent and "a line longer than 65,536 bytes" in str(got) and server.address in str(got)
    assert took < 5 and list(tmp_path.iterdir()) == []  # nothing kept


def test_an_endless_line_counts_against_the_byte_cap(tmp_path: Path) -> None:
    cap = 2 * 1024**2
    with hostile_memcached(watch="endless-line") as server:
        got, took = _run(10, targets=_target(server), out=tmp_path / "cap.log", duration_s=60, max_bytes=cap,
                         max_line=BIG_LINE)
    assert isinstance(got, CaptureResult), got
    assert got.stopped == "size cap" and got.fetches == 0 and took < 5


def test_an_endless_line_ends_at_the_duration(tmp_path: Path) -> None:
    with hostile_memcached(watch="endless-line", trickle_s=0.1) as server:
        got, took = _run(10, targets=_target(server), out=tmp_path / "cap.log", duration_s=1.0, max_line=BIG_LINE)
    assert isinstance(got, CaptureResult), got
    assert got.stopped == "duration" and got.lines == 0 and took < 4  # the cut line is awaited 1 s at most


def test_the_stop_flag_ends_a_capture_inside_an_endless_line(tmp_path: Path) -> None:
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    with hostile_memcached(watch="endless-line", trickle_s=0.1) as server:
        got, took = _run(10, targets=_target(server), out=tmp_path / "cap.log", stop=stop, max_line=BIG_LINE)
    assert isinstance(got, CaptureResult), got
    assert got.stopped == "interrupted" and took < 4


def test_an_endless_stats_reply_is_refused_at_its_cap(tmp_path: Path) -> None:
    caps = LineCaps(max_bytes=256 * 1024, max_line=4096, max_lines=1_000_000)
    with hostile_memcached(stats_mode="endless") as server:
        with socket.create_connection((server.host, server.port)) as sock:
            tracemalloc.start()
            with pytest.raises(WireLimit) as caught:
                read_stats(sock, server.address, timeout_s=30, caps=caps)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        # and the capture, which reads stats first, fails naming it
        got, _ = _run(10, targets=_target(server), out=tmp_path / "cap.log", duration_s=5,
                      stats_caps=LineCaps(max_bytes=256 * 1024, max_line=4096, max_lines=1000))
    assert caught.value.limit == "bytes" and caught.value.permanent
    assert f"memcached {server.address}: stats: more than 262,144 bytes" in str(caught.value)
    assert peak < 8 * caps.max_bytes, peak  # the lines held as objects: bounded by the cap, not the stream
    assert isinstance(got, CaptureFailed) and got.permanent and "stats: more than 1,000 lines" in str(got)


def test_a_slow_stats_reply_ends_at_the_deadline() -> None:
    with hostile_memcached(stats_mode="normal") as server, socket.create_connection((server.host, server.port)) as s:
        reader = LineReader("peer", LineCaps(max_bytes=0, max_line=100), sock=s, deadline=time.monotonic() + 0.5)
        t0 = time.monotonic()
        with pytest.raises(WireLimit) as caught:
            reader.readline()  # nothing asked: the server sends nothing
    assert caught.value.limit == "deadline" and not caught.value.permanent and time.monotonic() - t0 < 2


def test_the_reader_splits_lines_however_they_arrive() -> None:
    reader = LineReader("peer", LineCaps(max_bytes=0, max_line=8))
    pieces = [b"ab", b"c\nde", b"f", b"\n", b"gh\r\nij"]
    got = b""
    for p in pieces:
        reader.take(p)
        got += reader.complete()
    assert got == b"abc\ndef\ngh\r\n" and reader.pending == 2
    reader.take(b"klmnop")  # "ijklmnop" is 8 bytes, no end yet: within the cap
    with pytest.raises(WireLimit) as caught:
        reader.take(b"q")
    assert caught.value.limit == "line"


def test_the_profilers_stats_reads_are_capped_and_checked() -> None:
    """The multiget profiler (discovery's `--profile-servers`, calibration) reads the server's CPU from `stats`
    through the same capped reader: an endless reply ends at the cap, a crafted value is refused naming it."""
    from analysis.memcached_profile import _server_cpu_s
    from base.errors import TailtuneError

    caps = LineCaps(max_bytes=64 * 1024, max_line=4096, max_lines=1000)
    with hostile_memcached(stats_mode="endless") as server, pytest.raises(WireLimit) as caught:
        _server_cpu_s(server.host, server.port, caps)
    assert caught.value.permanent and server.sent < 64 * caps.max_bytes
    for value in ("inf", "-1", "x" * 5000):
        stats = {"version": "1.6.21", "rusage_user": value, "rusage_system": "0.5"}
        with hostile_memcached(stats=stats) as server, pytest.raises(TailtuneError) as bad:
            _server_cpu_s(server.host, server.port, caps)
        assert "field 'rusage_user'/'rusage_system'" in str(bad.value)
    with hostile_memcached(stats={"rusage_user": "1.25", "rusage_system": "0.5"}) as server:
        assert _server_cpu_s(server.host, server.port, caps) == 1.75
