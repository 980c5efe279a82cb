"""The format registry (`ingest.formats.READERS`) is the one list of trace formats: `tailtune ingest --format`
(its help and its check), the service's upload `format` field and `--format auto` all know every format of it,
and a format added to it alone (a reader module + its entry) is known to all of them."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest
import typer

from base.errors import BadInputError
from ingest.formats import READERS, format_choices, format_names, reader_class
from ingest.formats.delimited import CsvReader
from ingest.formats.head import Head
from ingest.pipeline import ingest_file
from ingest.sniff import sniff
from service.errors import Invalid
from service.traces.service import check_format
from tests.ingest.samples import valid_file

ROWS = [(i, f"k{i}", 10 * i + 1) for i in range(12)]
#: How a chronicle-queue file (a binary full query log's) starts: a header document naming its store.
CHRONICLE_HEAD = bytes.fromhex("c1000040b906686561646572b60853435153746f726582aa000000")


class SemicolonReader(CsvReader):
    """A format only this test registers: canonical rows separated by semicolons, detected by its header."""

    name: ClassVar[str] = "semicolon"
    delimiter: ClassVar[str] = ";"
    sniff_rank: ClassVar[int | None] = 65

    @classmethod
    def sniff(cls, head: Head) -> str | None:
        names = head.lines[0].decode("utf-8", errors="replace").split(";")
        return "semicolon-separated canonical header" if {"ts", "key"} <= set(names) else None


def _format_option_help() -> str:
    """The help of `tailtune ingest --format`, as the command built now shows it."""
    from tailtune.cli.app import app

    command = typer.main.get_command(app).commands["ingest"]  # type: ignore[attr-defined]
    option = next(p for p in command.params if "--format" in p.opts)
    assert isinstance(option.help, str)
    return option.help


def _service_refusal() -> str:
    with pytest.raises(Invalid) as err:
        check_format("no-such-format")
    assert err.value.field == "format"
    return str(err.value)


def _listed(text: str) -> list[str]:
    """The names in a comma-separated list ending the text ("…; one of a, b, c" or "a, b, c.")."""
    tail = text.rsplit(";", 1)[-1].replace("one of", "")
    return [n.strip(" .") for n in tail.split(",")]


def test_every_format_of_the_registry_is_known_everywhere(write, settings):
    names = format_names()
    assert names and format_choices() == ("auto", *names)
    assert _listed(_format_option_help()) == list(format_choices())
    assert _listed(_service_refusal()) == list(format_choices())
    for name in names:
        reader = reader_class(name)
        assert reader.name == name
        assert check_format(name) == name
        if reader.sniff_rank is None:
            continue
        if reader.reads_directory:  # a file of it is detected and refused; its directory: test_cassandra_fql_real
            path = write(f"sample-{name}.cq4", CHRONICLE_HEAD + bytes(64))
            assert sniff(path).format == name, name
            with pytest.raises(BadInputError, match="ingest the directory that holds it"):
                ingest_file(path, settings=settings)
            continue
        body, keys = valid_file(name, ROWS)
        path = write(f"sample-{name}", body)
        assert sniff(path).format == name, name
        info = ingest_file(path, settings=settings)
        assert info.manifest["source"]["format"] == name
        assert info.read_table().column("key").to_pylist() == keys


def test_a_format_added_to_the_registry_alone_is_known_everywhere(monkeypatch, cli, write, tailtune_home):
    monkeypatch.setitem(READERS, "semicolon", f"{__name__}:SemicolonReader")
    assert "semicolon" in _listed(_format_option_help())
    assert check_format("semicolon") == "semicolon"
    assert "semicolon" in _listed(_service_refusal())

    p = write("t.txt", "ts;key;value_size\n" + "".join(f"{t};{k};{s}\n" for t, k, s in ROWS))
    r = cli("ingest", str(p), "--json")
    assert r.exit_code == 0, r.stderr
    assert "format: semicolon (auto: semicolon-separated canonical header)" in r.stderr
    summary: dict[str, Any] = json.loads(r.stdout)
    assert (summary["format"], summary["rows"]) == ("semicolon", len(ROWS))

    r = cli("ingest", str(p), "--format", "bogus")
    assert r.exit_code == 2
    assert "semicolon" in r.stderr

    monkeypatch.undo()
    assert "semicolon" not in format_choices()
    assert "semicolon" not in _listed(_format_option_help())
    with pytest.raises(Invalid):
        check_format("semicolon")


def test_a_registry_entry_must_name_its_reader(monkeypatch):
    monkeypatch.setitem(READERS, "semicolon", "ingest.formats.delimited:CsvReader")
    with pytest.raises(TypeError, match="not a TraceReader named 'semicolon'"):
        reader_class("semicolon")
