"""What a hostile live system reports to discovery: memcached's `stats` from an attacker posing as memcached (an
endless STAT stream, crafted values), and — the attacker CQL endpoint (tests/servers/fake_cql.py) serving only the
handshake — Cassandra's system tables at the parsing boundary with the values named. Every value is accepted
within the operator's ranges (`INPUT_RANGES`) or refused for good, naming the node and the field; `stats` replies
are read within their caps."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from base.settings import Settings
from control.discovery import DiscoveryFailed, discover
from control.discovery import integer as _integer
from control.model import INPUT_RANGES, MODEL_MAX_SLOTS
from kinds.cassandra.discovery import _release, _tokens, parse_strategy, slots_of
from tests.app_fixtures import Svc, memcached_deployment
from tests.servers.hostile_memcached import HostileMemcached, hostile_memcached

API = "/api/v1"


@pytest.fixture(scope="module")
def attacker() -> Iterator[HostileMemcached]:
    with hostile_memcached() as server:
        yield server


def _discover(server: HostileMemcached, settings_: Settings) -> Any:
    return discover("memcached", {"servers": [server.address]}, [], settings_)


def test_an_endless_stats_stream_is_refused_at_its_cap(settings: Settings) -> None:
    settings.memcached_stats_max_bytes = 256 * 1024
    settings.memcached_stats_max_lines = 10_000_000  # the byte cap first
    with hostile_memcached(stats_mode="endless") as server:
        t0 = time.monotonic()
        with pytest.raises(DiscoveryFailed) as caught:
            _discover(server, settings)
        took = time.monotonic() - t0
        sent = server.sent
    assert caught.value.permanent and took < 5
    assert f"memcached {server.address}: stats: more than 262,144 bytes" in str(caught.value)
    assert sent < 256 * 1024 + 16 * 1024**2  # the cap and what the sockets' buffers took, not an endless stream


def test_a_stats_reply_of_too_many_lines_is_refused(settings: Settings) -> None:
    settings.memcached_stats_max_lines = 100
    with hostile_memcached(stats_mode="endless") as server, pytest.raises(DiscoveryFailed) as caught:
        _discover(server, settings)
    assert caught.value.permanent and "stats: more than 100 lines" in str(caught.value)


@pytest.mark.parametrize(
    ("threads", "problem"),
    [
        (str(10**23), "out of range [1, 1024]"),
        ("0", "out of range [1, 1024]"),
        ("four", "expected an integer"),
        ("9" * 5000, "expected an integer of at most 40 digits"),
    ],
)
def test_memcached_threads_out_of_range_fail_discovery_naming_the_server(
    attacker: HostileMemcached, settings: Settings, threads: str, problem: str
) -> None:
    attacker.stats = {"version": "1.6.21", "threads": threads}
    with pytest.raises(DiscoveryFailed) as caught:
        _discover(attacker, settings)
    assert caught.value.permanent  # not retried: reading again reads the same
    assert f"memcached {attacker.address}: stats: field 'threads': " in str(caught.value)
    assert problem in str(caught.value) and len(str(caught.value)) < 400


@settings(max_examples=60, deadline=None, derandomize=True)
@given(threads=st.one_of(st.integers(min_value=-(10**30), max_value=10**30).map(str),
                         st.text(alphabet=st.characters(blacklist_characters="\r\n", codec="ascii"), max_size=50)))
def test_any_threads_value_is_accepted_in_range_or_refused_naming_server_and_field(
    attacker: HostileMemcached, tmp_path_factory: pytest.TempPathFactory, threads: str
) -> None:
    attacker.stats = {"version": "1.6.21", "threads": threads}
    s = Settings(home=tmp_path_factory.mktemp("home"))
    try:
        found = _discover(attacker, s)
    except DiscoveryFailed as exc:
        assert exc.permanent and f"memcached {attacker.address}: stats: field 'threads'" in str(exc)
        return
    value = found.inputs["worker_threads"]["value"]
    assert INPUT_RANGES["worker_threads"].problem(value) is None


def test_a_server_port_out_of_range_is_refused_at_the_api(svc: Svc) -> None:
    for server in ("127.0.0.1:99999", "127.0.0.1:0", "h:65536"):
        r = svc.client.post(f"{API}/deployments", json=memcached_deployment("mc-port", [server]), headers=svc.write)
        assert r.status_code == 422 and "connection.servers" in r.text and "1..65535" in r.text, r.text
    r = svc.client.post(f"{API}/deployments", json=memcached_deployment("mc-port", ["h:65535"]), headers=svc.write)
    assert r.status_code == 201, r.text


# --- Cassandra's system tables, at the parsing boundary -------------------------------------------------------
NODE = "cassandra node 10.0.0.1:9042"


def _refused(call: Any, field: str) -> str:
    with pytest.raises(DiscoveryFailed) as caught:
        call()
    assert caught.value.permanent and f"{NODE}: field '{field}': " in str(caught.value), str(caught.value)
    return str(caught.value)


def test_a_node_with_more_concurrent_reads_than_the_model_holds_is_modelled_at_its_most_and_said_so() -> None:
    assert slots_of("32", NODE, "n1") == (32, "system_views.settings concurrent_reads of n1", None)
    slots, how, note = slots_of("128", NODE, "n1")
    assert slots == MODEL_MAX_SLOTS == 64 and how.endswith("128 modelled as 64")
    assert note is not None and "concurrent_reads 128 of n1" in note


def test_the_slots_range_is_the_simulators() -> None:
    """The API and discovery accept exactly the slots kvsim replays: its top accepted, one more refused by both."""
    import kvsim

    top = int(INPUT_RANGES["slots"].high)
    assert top == MODEL_MAX_SLOTS and INPUT_RANGES["slots"].problem(top) is None
    kvsim.Cluster(slots=top)
    assert INPUT_RANGES["slots"].problem(top + 1) is not None
    with pytest.raises(ValueError, match="'slots'"):
        kvsim.Cluster(slots=top + 1)


def test_cassandra_values_out_of_range_are_refused_naming_node_and_field() -> None:
    simple = "org.apache.cassandra.locator.SimpleStrategy"
    nts = "org.apache.cassandra.locator.NetworkTopologyStrategy"
    assert "out of range [1, 16]" in _refused(
        lambda: parse_strategy({"class": simple, "replication_factor": str(10**30)}, NODE),
        "replication.replication_factor")
    _refused(lambda: parse_strategy({"class": simple, "replication_factor": "three"}, NODE),
             "replication.replication_factor")
    _refused(lambda: parse_strategy({"class": nts, "dc1": "x/1"}, NODE), "replication.dc1")
    assert parse_strategy({"class": nts, "dc1": "3/1", "dc2": "0"}, NODE)["replication"] == {"dc1": 3, "dc2": 0}
    _refused(lambda: _tokens(["12", "abc"], "Murmur3Partitioner", NODE), "tokens")
    assert "outside the Murmur3Partitioner's range" in _refused(
        lambda: _tokens([str(2**64)], "Murmur3Partitioner", NODE), "tokens")
    assert _tokens(["5", "-3"], "Murmur3Partitioner", NODE) == [-3, 5]
    _refused(lambda: _release("5" * 5000 + ".0", NODE), "release_version")
    assert "more than a Java int holds" in _refused(lambda: slots_of(str(10**30), NODE, "n1"), "concurrent_reads")
    assert "out of range [1, 64]" in _refused(lambda: slots_of("0", NODE, "n1"), "concurrent_reads")
    _refused(lambda: _integer("12abc", NODE, "concurrent_reads"), "concurrent_reads")


_TEXT = st.one_of(st.integers(min_value=-(2**130), max_value=2**130).map(str), st.text(max_size=60),
                  st.just("9" * 5000))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(rf=_TEXT, token=_TEXT, release=_TEXT, reads=_TEXT)
def test_any_cassandra_value_is_accepted_in_range_or_refused_naming_node_and_field(
    rf: str, token: str, release: str, reads: str
) -> None:
    def holds(call: Any, field: str) -> Any:
        try:
            return call()
        except DiscoveryFailed as exc:
            assert exc.permanent and f"{NODE}: field '{field}': " in str(exc) and len(str(exc)) < 600
            return None

    got = holds(lambda: parse_strategy({"class": "SimpleStrategy", "replication_factor": rf}, NODE),
                "replication.replication_factor")
    if got is not None:
        assert 0 <= got["replication_factor"] <= INPUT_RANGES["replication"].high
    tokens = holds(lambda: _tokens([token], "Murmur3Partitioner", NODE), "tokens")
    if tokens is not None:
        assert -(2**63) <= tokens[0] <= 2**63 - 1
    holds(lambda: _release(release, NODE), "release_version")
    found = holds(lambda: slots_of(reads, NODE, "n1"), "concurrent_reads")
    if found is not None:
        assert INPUT_RANGES["slots"].problem(found[0]) is None
