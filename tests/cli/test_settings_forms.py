"""Settings as people write them: every list setting takes the plain comma-separated form and a JSON list; a
malformed setting is one line naming the variable and the form it expects (exit 2 in every command, `serve` and
`worker` included), never a traceback and never the value."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from base.settings import ENV_PREFIX, Settings, SettingsInvalid, _is_list, get_settings, load_settings

LIST_FIELDS = sorted(name for name, f in Settings.model_fields.items()
                     if _is_list(f.annotation) and typing.get_args(f.annotation) in ((str,), ()))
#: Lists of numbers (the capacity measurement's rates): the same two forms, their items numbers.
NUMBER_LIST_FIELDS = sorted(name for name, f in Settings.model_fields.items()
                            if _is_list(f.annotation) and typing.get_args(f.annotation) == (float,))
NUMBER_FIELDS = sorted(
    name for name, f in Settings.model_fields.items() if f.annotation in (int, float, "int", "float")
)
BOOL_FIELDS = sorted(name for name, f in Settings.model_fields.items() if f.annotation in (bool, "bool"))


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[pytest.MonkeyPatch]:
    for k in list(os.environ):
        if k.startswith(ENV_PREFIX):
            monkeypatch.delenv(k)
    monkeypatch.setenv("TAILTUNE_HOME", str(tmp_path / "home"))
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


def test_the_list_settings_are_found() -> None:
    assert {"connect_networks", "api_tokens", "password_envs", "api_allowed_hosts"} <= set(LIST_FIELDS)
    assert "api_port" in NUMBER_FIELDS and BOOL_FIELDS


@pytest.mark.parametrize("field", LIST_FIELDS)
def test_the_plain_form_of_every_list_setting(clean_env: pytest.MonkeyPatch, field: str) -> None:
    var = ENV_PREFIX + field.upper()
    clean_env.setenv(var, "10.20.0.0/16")
    assert getattr(load_settings(), field) == ["10.20.0.0/16"]
    clean_env.setenv(var, " 10.20.0.0/16 , 10.30.0.0/16,")
    assert getattr(load_settings(), field) == ["10.20.0.0/16", "10.30.0.0/16"]
    clean_env.setenv(var, '["10.20.0.0/16", "a,b"]')
    assert getattr(load_settings(), field) == ["10.20.0.0/16", "a,b"]
    clean_env.setenv(var, "")
    assert getattr(load_settings(), field) == []


@pytest.mark.parametrize("field", NUMBER_LIST_FIELDS)
def test_the_plain_form_of_every_number_list_setting(clean_env: pytest.MonkeyPatch, field: str) -> None:
    var = ENV_PREFIX + field.upper()
    clean_env.setenv(var, " 100 , 250.5,")
    assert getattr(load_settings(), field) == [100.0, 250.5]
    clean_env.setenv(var, "[100, 300]")
    assert getattr(load_settings(), field) == [100.0, 300.0]
    clean_env.setenv(var, "100,fast")
    with pytest.raises(SettingsInvalid, match=var):
        load_settings()


def test_the_number_list_settings_are_found() -> None:
    assert "calibrate_capacity_rates" in NUMBER_LIST_FIELDS


_ITEM = st.text(
    st.characters(codec="ascii", categories=("L", "N", "P", "S"), exclude_characters=",[\"\\"), min_size=1,
    max_size=20,
).map(str.strip).filter(bool)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    field=st.sampled_from(LIST_FIELDS),
    items=st.lists(_ITEM, max_size=6),
    form=st.sampled_from(["plain", "spaced", "json", "json-spaced"]),
)
def test_any_list_in_any_form_reads_back(field: str, items: list[str], form: str) -> None:
    text = {
        "plain": ",".join(items),
        "spaced": " , ".join(items) + " ",
        "json": json.dumps(items),
        "json-spaced": "  " + json.dumps(items, indent=1),
    }[form]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV_PREFIX + field.upper(), text)
        assert getattr(load_settings(), field) == items


_GARBAGE = st.one_of(
    st.text(st.characters(codec="ascii", categories=("L", "P", "S")), min_size=1, max_size=12).filter(
        lambda s: s.strip() and s.strip().lower() not in ("inf", "infinity", "nan", "-inf", "+inf")
    ),
    st.just("1e999x"),
    st.just("[1"),
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(field=st.sampled_from(NUMBER_FIELDS + BOOL_FIELDS + LIST_FIELDS), value=_GARBAGE)
def test_a_malformed_setting_names_the_variable_and_the_form(field: str, value: str) -> None:
    var = ENV_PREFIX + field.upper()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(var, value)
        try:
            load_settings()
        except SettingsInvalid as exc:
            message = str(exc)
            assert message.startswith(f"{var}: ") and "expected " in message and "\n" not in message
            assert exc.exit_code == 2
            if len(value) > 3 and not value.isalpha():
                assert value not in message  # the value is never echoed (it may be a credential)
        else:  # what is valid for the field (a list of one garbage string, a bool spelling, ...)
            assert field in LIST_FIELDS or field in BOOL_FIELDS or value.strip().lstrip("+-").isdigit()


@pytest.mark.parametrize(
    ("args", "var", "value", "expected"),
    [
        (["serve"], "TAILTUNE_CONNECT_NETWORKS", '["10.20.0.0/16"', "a comma-separated list"),
        (["worker"], "TAILTUNE_API_PORT", "eighty", "expected an integer"),
        (["datasets", "list"], "TAILTUNE_OPEN_READS_ON_LOCALHOST", "perhaps", "expected true or false"),
        (["worker"], "TAILTUNE_WORKER_POLL_S", "soon", "expected a number"),
    ],
)
def test_every_command_reports_a_malformed_setting_in_one_line(
    tmp_path: Path, args: list[str], var: str, value: str, expected: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    env |= {"TAILTUNE_HOME": str(tmp_path / "home"), var: value}
    proc = subprocess.run(
        [sys.executable, "-m", "tailtune", *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {var}: "), proc.stderr
    assert expected in lines[0] and "Traceback" not in proc.stderr and value not in lines[0]


def test_serve_and_worker_start_with_the_plain_form(tmp_path: Path) -> None:
    """The form of the report: `TAILTUNE_CONNECT_NETWORKS=10.20.0.0/16` no longer stops a command."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    env |= {"TAILTUNE_HOME": str(tmp_path / "home"), "TAILTUNE_CONNECT_NETWORKS": "10.20.0.0/16,10.30.0.0/16"}
    proc = subprocess.run(
        [sys.executable, "-m", "tailtune", "serve", "--create-token", "read", "--json"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["scope"] == "read"
