"""`render_stock`: the exact texts a stock recommendation is published as (CQL, yaml, JMX, the Java driver 4
profile, the Python driver settings, the notes), and the refusals."""

from __future__ import annotations

import json

import pytest

from base.errors import BadInputError
from simulation.stock_knobs import EXTRA_READS_ONLY, STOCK_KNOBS, StockKnob
from simulation.stock_render import IDEMPOTENCE_NOTE, SNITCH_NOTE, render_stock

JAVA_HEAD = (
    "# Java driver 4: an execution profile for the multiget reads (application.conf).\n"
    '# Select it with statement.setExecutionProfileName("tailtune").\n'
    "# The driver speculates only on idempotent statements; basic.request.default-idempotence is false.\n"
    "datastax-java-driver.profiles.tailtune {\n"
)
JAVA_TAIL = (
    "  # Only if every statement run with this profile is idempotent:\n"
    "  # basic.request.default-idempotence = true\n"
    "}\n"
)


def java_tick(ms: int) -> str:
    """The global timer-tick lines the Java rendering ends with for a hedge under 100 ms."""
    return (
        "# Global, not in a profile (the driver reads it only here, when the session starts): the timer fires each\n"
        "# speculative execution on its first tick past the delay (default tick 100 ms).\n"
        f"datastax-java-driver.advanced.netty.timer.tick-duration = {ms} milliseconds\n"
    )


def tick_note(ms: int, delay: int) -> str:
    return (
        "the Java driver 4 fires a speculative execution on its timer's first tick past the delay: "
        f"advanced.netty.timer.tick-duration = {ms} ms keeps the {delay} ms hedge within {ms} ms of it (on the "
        "default 100 ms tick it would fire up to 100 ms late); it is a global setting, set outside the profile, for "
        "the whole session (its request timeouts too), read when the session starts; on Windows the driver warns "
        "that ticks under 100 ms cost CPU"
    )


SNITCH_PLACEHOLDER_NOTE = (
    "<endpoint_snitch> in the JMX operation is the cluster's endpoint_snitch class (cassandra.yaml, or SELECT "
    "value FROM system_views.settings WHERE name = 'endpoint_snitch'), not DynamicEndpointSnitch"
)


PYTHON_DEFAULTS = {
    "load_balancing": {"policy": "TokenAwarePolicy", "shuffle_replicas": False},
    "speculative_execution": None,
    "idempotent_only": True,
    "default_idempotent": False,
}
OTHER_DRIVER_NOTE = {
    "java4": "driver settings: tuned for the deployment's driver (java4); the python rendering carries the same "
    "speculative execution and the python driver's defaults for its own knobs",
    "python": "driver settings: tuned for the deployment's driver (python); the java4 rendering carries the same "
    "speculative execution and the java4 driver's defaults for its own knobs",
}


def test_defaults_for_the_java_driver() -> None:
    out = render_stock({}, tables=["shop.carts"])
    assert out == {
        "cql": ["ALTER TABLE shop.carts WITH speculative_retry = '99p';"],
        "yaml": (
            "# not applied by tailtune: cassandra.yaml on every node (read at start)\n"
            "dynamic_snitch_update_interval: 100ms\n"
            "dynamic_snitch_reset_interval: 600000ms\n"
            "dynamic_snitch_badness_threshold: 1.0\n"
        ),
        "jmx": [
            'org.apache.cassandra.db:type=StorageService updateSnitch("<endpoint_snitch>", true, 100, 600000, 1.0)'
        ],
        "driver": {
            "java": JAVA_HEAD
            + "  basic.load-balancing-policy.slow-replica-avoidance = true\n"
            + "  advanced.speculative-execution-policy.class = NoSpeculativeExecutionPolicy\n"
            + JAVA_TAIL,
            "python": PYTHON_DEFAULTS,
        },
        "notes": [
            IDEMPOTENCE_NOTE,
            SNITCH_NOTE,
            SNITCH_PLACEHOLDER_NOTE,
            OTHER_DRIVER_NOTE["java4"],
        ],
    }


def test_java_speculation_normalised_retry_and_snitch_values() -> None:
    params = {
        "speculative_retry": "min(5ms , 99PERCENTILE)",
        "dynamic_snitch_badness_threshold": 0.25,
        "dynamic_snitch_update_interval": 50,
        "dynamic_snitch_reset_interval": 60000.0,
        "driver.speculative_execution.max_executions": 3,
        "driver.speculative_execution.delay": 2.5,
        "driver.slow_replica_avoidance": 0,
    }
    out = render_stock(
        params,
        tables=["shop.carts", "shop.items"],
        driver="java4",
        endpoint_snitch="org.apache.cassandra.locator.GossipingPropertyFileSnitch",
    )
    assert out["cql"] == [
        "ALTER TABLE shop.carts WITH speculative_retry = 'MIN(99p,5ms)';",
        "ALTER TABLE shop.items WITH speculative_retry = 'MIN(99p,5ms)';",
    ]
    assert out["yaml"] == (
        "# not applied by tailtune: cassandra.yaml on every node (read at start)\n"
        "dynamic_snitch_update_interval: 50ms\n"
        "dynamic_snitch_reset_interval: 60000ms\n"
        "dynamic_snitch_badness_threshold: 0.25\n"
    )
    assert out["jmx"] == [
        "org.apache.cassandra.db:type=StorageService updateSnitch("
        '"org.apache.cassandra.locator.GossipingPropertyFileSnitch", true, 50, 60000, 0.25)'
    ]
    assert out["driver"]["java"] == (
        JAVA_HEAD
        + "  basic.load-balancing-policy.slow-replica-avoidance = false\n"
        + "  advanced.speculative-execution-policy {\n"
        + "    class = ConstantSpeculativeExecutionPolicy\n"
        + "    max-executions = 3\n"
        + "    delay = 2 milliseconds\n"
        + "  }\n"
        + JAVA_TAIL
        + java_tick(1)
    )
    # the Python rendering: the same speculative execution (2.5 ms; 3 executions = 2 extra), its own defaults
    assert out["driver"]["python"] == {
        **PYTHON_DEFAULTS,
        "speculative_execution": {
            "policy": "ConstantSpeculativeExecutionPolicy",
            "delay": 0.0025,
            "max_attempts": 2,
        },
    }
    assert out["notes"] == [
        IDEMPOTENCE_NOTE,
        SNITCH_NOTE,
        "the Java driver 4 drops sub-millisecond precision: a delay of 2.5 ms runs as 2 ms",
        tick_note(1, 2),
        OTHER_DRIVER_NOTE["java4"],
    ]


def test_python_settings_count_only_the_extra_executions() -> None:
    params = {
        "speculative_retry": "NONE",
        "driver.speculative_execution.max_executions": 3,
        "driver.speculative_execution.delay": 4,
        "driver.shuffle_replicas": 1,
        "multiget.shape": "per-partition",
        "multiget.chunk": 16,
    }
    out = render_stock(params, tables=["a.b"], driver="python")
    assert out["cql"] == ["ALTER TABLE a.b WITH speculative_retry = 'NEVER';"]
    assert out["driver"] == {
        "java": JAVA_HEAD
        + "  basic.load-balancing-policy.slow-replica-avoidance = true\n"
        + "  advanced.speculative-execution-policy {\n"
        + "    class = ConstantSpeculativeExecutionPolicy\n"
        + "    max-executions = 3\n"
        + "    delay = 4 milliseconds\n"
        + "  }\n"
        + JAVA_TAIL
        + java_tick(1),
        "python": {
            "load_balancing": {"policy": "TokenAwarePolicy", "shuffle_replicas": True},
            "speculative_execution": {
                "policy": "ConstantSpeculativeExecutionPolicy",
                "delay": 0.004,
                "max_attempts": 2,
            },
            "idempotent_only": True,
            "default_idempotent": False,
        },
    }
    assert out["notes"][-2:] == [
        OTHER_DRIVER_NOTE["python"],
        "multiget shape (application code): one query per partition, 16 keys per query",
    ]


def test_python_defaults_do_not_shuffle_or_speculate() -> None:
    out = render_stock({}, tables=[], driver="python")
    assert out["cql"] == []
    assert out["driver"]["python"] == PYTHON_DEFAULTS
    assert "no tables: the deployment names none, so no speculative_retry is applied" in out["notes"]


@pytest.mark.parametrize(
    ("params", "driver", "problem"),
    [
        (
            {"driver.shuffle_replicas": 1},
            "java4",
            "refused for driver java4: the Java driver 4 always shuffles replicas; it has no setting for it",
        ),
        (
            {"driver.slow_replica_avoidance": 0},
            "python",
            "refused for driver python: the Python driver has no slow-replica avoidance (only the Java driver 4's "
            "DefaultLoadBalancingPolicy)",
        ),
        ({"driver.speculative_execution.max_executions": 0}, "java4", "must be an integer >= 1, got 0"),
        ({"driver.speculative_execution.delay": -1}, "python", "must be a number >= 0, got -1"),
        ({}, "go", "unknown driver 'go' (one of java4, python)"),
    ],
)
def test_refusals_name_the_knob_and_the_reason(params: dict[str, object], driver: str, problem: str) -> None:
    with pytest.raises(BadInputError) as err:
        render_stock(params, tables=["a.b"], driver=driver)
    assert err.value.problems[0].problem == problem


def test_a_bad_speculative_retry_is_refused() -> None:
    with pytest.raises(BadInputError):
        render_stock({"speculative_retry": "MIN(99p,95p)"}, tables=["a.b"])


def test_a_patched_candidate_keeps_its_stock_knobs_out_of_the_scheduler_block() -> None:
    from tuner.recommend import render_cassandra
    from tuner.space import Candidate

    cand = Candidate("rein", {"k": 4, "speculative_retry": "50ms", "driver": "java4",
                              "driver.speculative_execution.max_executions": 2})
    out = render_cassandra(cand)
    assert out["json"] == {"request_scheduler": "rein", "request_scheduler_options": {"queues": 4}}
    assert out["properties"] == "scheduler.policy=rein\nscheduler.rein.queues=4\n"
    stock = render_stock({k: v for k, v in cand.params.items() if k != "k"}, tables=["ks.t"])
    assert stock["cql"] == ["ALTER TABLE ks.t WITH speculative_retry = '50ms';"]


def _another_value(knob: StockKnob, driver: str) -> int | float | str:
    """A value of `knob` other than its default for `driver`, inside its search range."""
    default = knob.default_for(driver)
    if knob.choices:
        return next(c for c in knob.choices if c != default)
    if knob.name == "speculative_retry":
        return "NEVER"
    assert knob.low is not None and knob.high is not None, f"{knob.name}: no search range to pick a value from"
    value = knob.high if knob.high != default else knob.low
    return int(value) if knob.kind == "int" else float(value)


@pytest.mark.parametrize("knob", STOCK_KNOBS, ids=lambda k: k.name)
def test_every_knob_of_the_table_is_rendered(knob: StockKnob) -> None:
    """A knob of the table reaches what a deployment is given: set to another value, the rendering changes (for
    every driver that has it). A row added to the table without its rendering fails here."""
    for driver in knob.drivers:
        base: dict[str, int | float | str] = dict(knob.only_with)
        if knob.name in EXTRA_READS_ONLY:
            base["driver.speculative_execution.max_executions"] = 2
        changed = {**base, knob.name: _another_value(knob, driver)}
        assert render_stock(changed, tables=["ks.t"], driver=driver) != render_stock(
            base, tables=["ks.t"], driver=driver
        ), f"{knob.name} = {changed[knob.name]!r} changes nothing in the {driver} rendering"


@pytest.mark.parametrize(
    ("execs", "delay", "tick"),
    [
        (2, 10, 1),  # a tenth of the delay
        (3, 25, 2),  # the largest whole ms at most a tenth: 2.5 → 2
        (2, 99.9, 9),  # the delay as the driver runs it (99 ms) / 10, whole
        (2, 5, 1),  # at least 1 ms (Netty's smallest tick)
        (2, 0, 1),  # a zero delay still fires on the timer's next tick
        (2, 0.4, 1),
        (2, 100, None),  # the default tick is at or below the delay: left as it is
        (2, 250, None),
        (1, 10, None),  # no hedge, no tick
    ],
)
def test_a_java_hedge_under_100ms_sets_the_timer_tick_globally(execs: int, delay: float, tick: int | None) -> None:
    params = {"driver.speculative_execution.max_executions": execs, "driver.speculative_execution.delay": delay}
    out = render_stock(params, tables=["a.b"], driver="java4")
    java: str = out["driver"]["java"]
    ticks = [n for n in out["notes"] if "tick-duration" in n]
    if tick is None:
        assert "netty" not in java and ticks == []
        return
    # after the profile's closing brace, at the top level: the driver ignores it inside a profile
    profile, _, after = java.partition("\n}\n")
    assert "netty" not in profile and after == java_tick(tick)
    assert ticks == [tick_note(tick, int(delay))]
    # the Python driver's settings carry no tick (its speculative executions are event-loop timers, no wheel)
    assert "tick" not in json.dumps(out["driver"]["python"])


def test_the_python_driver_renders_no_tick() -> None:
    params = {"driver.speculative_execution.max_executions": 2, "driver.speculative_execution.delay": 10}
    out = render_stock(params, tables=["a.b"], driver="python")
    assert "tick" not in json.dumps(out["driver"]["python"])
    assert not [n for n in out["notes"] if "tick" in n]
    # the Java rendering beside it carries the same hedge, so the tick that hedge needs
    assert out["driver"]["java"].endswith(java_tick(1))
