"""The watch-log grammar (`ingest.mcwatch`): the fast path that reads memcached's own lines without splitting them
gives what the field-by-field parser gives, for every line either reads."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from ingest.mcwatch import LineProblem, WatchLine, _parse_slowly, parse_line

_KEY = st.text(string.ascii_letters + string.digits + "-._~:%/!", min_size=1, max_size=20)


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    server = draw(st.sampled_from(["", "server=10.0.0.5:11211 "]))
    ts = f"{draw(st.integers(0, 10**12 - 1))}.{draw(st.integers(0, 999_999))}"
    head = f"{server}ts={ts} gid={draw(st.integers(0, 10**18 - 1))}"
    key = draw(_KEY)
    cfd = draw(st.integers(-1, 10**6))
    size = draw(st.integers(0, 10**9))
    if draw(st.booleans()):
        status = draw(st.sampled_from(["found", "not_found", "flushed", "expired"]))
        body = f"type=item_get key={key} status={status} clsid=1 cfd={cfd} size={size}"
    else:
        status = draw(st.sampled_from(["stored", "not_stored", "exists", "not_found", "too_large", "no_memory"]))
        body = f"type=item_store key={key} status={status} cmd=set ttl=0 clsid=1 cfd={cfd} size={size}"
    end = draw(st.sampled_from(["", "\n", "\r\n"]))
    return f"{head} {body}{end}".encode()


def _either(raw: bytes) -> WatchLine | str:
    try:
        return _parse_slowly(raw)
    except LineProblem as exc:
        return f"{exc.field}: {exc.problem}"


@given(lines())
def test_the_fast_path_reads_as_the_parser(raw: bytes) -> None:
    assert parse_line(raw) == _either(raw)


def test_unpadded_microseconds_and_uri_keys() -> None:
    line = parse_line(b"ts=1700000000.5042 gid=3 type=item_get key=user%3A1 status=found clsid=1 cfd=9 size=5\n")
    assert (line.us, line.key, line.cfd, line.size) == (1_700_000_000_005_042, "user:1", 9, 5)
