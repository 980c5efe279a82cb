"""Bad profile/option/arguments → exit 2 with one clear line; nothing half-written; the CLI's summary."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from base.errors import BadInputError
from ingest.generate import PROFILES, make_profile, parse_option_strings, write_trace
from tailtune.cli.commands.generate import PROFILE_NAMES


def test_profile_names_are_the_contract() -> None:
    assert list(PROFILES) == ["soundcloud", "facebook", "constant50", "bimodal", "mice-elephant", "diurnal"]
    assert list(PROFILE_NAMES) == list(PROFILES)


def test_unknown_profile_lists_valid_choices(cli: Callable[..., Any], tailtune_home: Path) -> None:
    result = cli("generate", "--profile", "zipf", "--requests", "10")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "unknown profile 'zipf'" in lines[0]
    assert "soundcloud, facebook, constant50, bimodal, mice-elephant" in lines[0]
    assert not (tailtune_home / "traces").exists()


def test_bad_option_value_names_the_field(cli: Callable[..., Any], tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    result = cli("generate", "-p", "mice-elephant", "-n", "10", "--option", "mix=9-1", "--out", str(out))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --option: field 'mix': expected MICE:ELEPHANTS")
    assert not out.exists()


def test_unknown_option_lists_the_profile_options(cli: Callable[..., Any]) -> None:
    result = cli("generate", "-p", "facebook", "-n", "10", "--option", "alpha=1.1")
    assert result.exit_code == 2
    assert "field 'alpha': unknown option for profile 'facebook' (valid: mu, sigma, max_size, zipf_alpha" in (
        result.stderr
    )


@pytest.mark.parametrize(
    ("profile", "options", "field", "problem"),
    [
        ("mice-elephant", {"mice": "x"}, "mice", 'expected an integer, got "x"'),
        ("mice-elephant", {"mice": "0"}, "mice", "expected an integer in 1..1000000"),
        ("facebook", {"sigma": "nan"}, "sigma", 'expected a finite number, got "nan"'),
        ("facebook", {"sigma": "-1"}, "sigma", "expected a positive number"),
        ("bimodal", {"large_fraction": "1.5"}, "large_fraction", "expected a fraction in [0, 1]"),
        ("soundcloud", {"mean_size": "5000"}, "mean_size", "is not reachable"),
        ("soundcloud", {"key_space": "100"}, "key_space", "must be at least max_size (2000)"),
        ("constant50", {"key_space": "10"}, "key_space", "must be at least size (50)"),
    ],
)
def test_option_validation(profile: str, options: dict[str, str], field: str, problem: str) -> None:
    with pytest.raises(BadInputError) as info:
        make_profile(profile, options)
    assert info.value.exit_code == 2
    [p] = info.value.problems
    assert (p.file, p.field) == ("--option", field)
    assert problem in p.problem


def test_option_strings_are_parsed() -> None:
    assert parse_option_strings(["mice=10", " mix = 5:1 "]) == {"mice": "10", "mix": "5:1"}
    with pytest.raises(BadInputError, match='expected KEY=VALUE, got "mice"'):
        parse_option_strings(["mice"])
    with pytest.raises(BadInputError, match="field 'mice': given more than once"):
        parse_option_strings(["mice=1", "mice=5"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--requests", "0"], "--requests: field 'requests': expected a positive integer, got 0"),
        (["--seed", "-3"], "--seed: field 'seed': expected a non-negative integer, got -3"),
        (["--rate", "0"], "--rate: field 'rate': expected a positive number, got 0.0"),
    ],
)
def test_bad_arguments_exit_2(cli: Callable[..., Any], tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "t.parquet"
    result = cli("generate", "-p", "constant50", "--out", str(out), *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_unsupported_extension_exit_2(cli: Callable[..., Any], tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    result = cli("generate", "-p", "constant50", "-n", "5", "--out", str(out))
    assert result.exit_code == 2
    assert "field 'out': unsupported output extension (valid: .csv, .csv.gz, .csv.zst, .parquet)" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_failure_midway_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    out.write_text("previous content\n")

    def boom(done: int) -> None:
        if done > 1000:
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_trace(out, "constant50", 5000, 1, batch_requests=1000, on_progress=boom)
    assert out.read_text() == "previous content\n"  # the old file is untouched
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]  # and no temp file remains


def test_json_summary(cli: Callable[..., Any], tmp_path: Path) -> None:
    out = tmp_path / "sub" / "me.csv.zst"
    result = cli(
        "generate", "-p", "mice-elephant", "-n", "2000", "-s", "4", "--rate", "500", "--out", str(out),
        "--option", "mice=1", "--option", "mix=5:1", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    s = json.loads(result.stdout)
    assert s["out"] == str(out) and out.is_file() and s["bytes"] == out.stat().st_size
    assert (s["profile"], s["seed"], s["rate"], s["format"]) == ("mice-elephant", 4, 500.0, "csv.zst")
    assert s["options"] == {
        "mice": 1,
        "elephants": 100,
        "mix": "5:1",
        "key_space": 100_000,
        "value_size": 1000,
    }
    elephants = (s["rows"] - s["requests"]) / 99  # rows = mice·1 + elephants·100
    assert s["requests"] == 2000 and elephants == int(elephants)
    assert s["mean_size"] == s["rows"] / 2000
    assert s["multi_key_fraction"] == elephants / 2000
    assert s["max_size"] == 100 and 0 < s["distinct_keys"] <= s["rows"]
    assert s["expected"]["mean_size"] == pytest.approx(1 * 5 / 6 + 100 / 6)
    assert s["duration_s"] == pytest.approx(2000 / 500, rel=0.1)


def test_default_output_goes_under_tailtune_home(cli: Callable[..., Any], tailtune_home: Path) -> None:
    result = cli("generate", "-p", "bimodal", "-n", "300", "-s", "2")
    assert result.exit_code == 0, result.stderr
    out = tailtune_home / "traces" / "bimodal-n300-s2.parquet"
    assert out.is_file()
    assert "mean multiget size" in result.stdout
    assert "bimodal-n300-s2.parquet" in result.stdout.replace("\n", "")
