"""The generator config's rules (the Java generator applies the same; see test_live for it refusing them)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from control.egress import Egress, EgressRefused
from kinds.cassandra.replay.config import ArmProfile, ConfigError, Endpoint, GeneratorConfig
from kinds.cassandra.replay.generator import run, run_java, run_python
from kinds.cassandra.replay.plan import Plan, PlanArm

NODE = Endpoint("127.0.0.1", 9042)
HEDGE = ArmProfile("hedge", speculative_class="ConstantSpeculativeExecutionPolicy", speculative_max_executions=2,
                   speculative_delay_ms=10)
CONFIG = GeneratorConfig((NODE,), (NODE,), "dc1", (ArmProfile("base"), HEDGE))
PLAN = Plan.of((PlanArm("base", "SELECT 1"), PlanArm("hedge", "SELECT 1")), [(0, 0, []), (1, 1, [])])


def test_a_good_config_passes_and_writes_no_password():
    CONFIG.check()
    doc = CONFIG.to_json()
    assert doc["arms"][1]["speculative_delay_ms"] == 10
    assert doc["arms"][0]["slow_replica_avoidance"] is True  # the Java driver's default
    assert "password" not in str(doc)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"allowed": (Endpoint("127.0.0.2", 9042),)}, "not in the allow-list"),
        ({"allowed": (Endpoint("127.0.0.1", 9043),)}, "not in the allow-list"),
        ({"contact_points": (Endpoint("localhost", 9042),)}, "not an IP address"),
        ({"timer_tick_ms": 20}, "fires on the tick"),
        ({"arms": (ArmProfile("a b"),)}, "name"),
        ({"arms": (ArmProfile("a", consistency="SOME"),)}, "consistency"),
        ({"arms": (ArmProfile("a", speculative_class="com.evil.Policy"),)}, "speculative_class"),
        ({"keyspace": "ks; DROP"}, "CQL name"),
        ({"max_in_flight": 0}, "max_in_flight"),
    ],
)
def test_a_config_that_breaks_a_rule_is_refused(change, why):
    with pytest.raises(ConfigError, match=why):
        replace(CONFIG, **change).check()


def test_the_allow_list_is_checked_before_anything_starts():
    outside = replace(CONFIG, allowed=(Endpoint("127.0.0.2", 9042),))
    for generator in (run_java, run_python):
        with pytest.raises(ConfigError, match="not in the allow-list"):
            generator(PLAN, outside)


def test_the_egress_rules_bound_the_allow_list():
    import ipaddress

    rules = Egress(networks=(ipaddress.ip_network("10.0.0.0/8"),))
    with pytest.raises(EgressRefused):
        run_java(PLAN, CONFIG, egress=rules)
    python_config = replace(CONFIG, arms=tuple(replace(a, slow_replica_avoidance=False) for a in CONFIG.arms))
    with pytest.raises(ConfigError, match="outside the networks"):
        run_python(PLAN, python_config, egress=rules)


def test_the_python_driver_refuses_the_java_drivers_knob():
    with pytest.raises(ConfigError, match="slow replica avoidance"):
        run_python(PLAN, replace(CONFIG, arms=(ArmProfile("base", slow_replica_avoidance=True), HEDGE)))


def test_an_unknown_driver_is_refused():
    with pytest.raises(ConfigError, match="java4, python"):
        run("java3", PLAN, CONFIG)
