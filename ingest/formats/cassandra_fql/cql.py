"""Just enough CQL to find the partitions a statement reads or writes, and the tables' partition keys.

`parse_statement(text)` tokenizes one statement of the full query log (a query, or one statement of a batch) and
returns what it touches: `Access` (a SELECT, INSERT, UPDATE or DELETE of one table, with the terms given for each
of its columns by `=` / `IN` in the WHERE clause, or by the column list of an INSERT), a batch text
(`BEGIN BATCH ... APPLY BATCH`) split into its statements, or `Other` (USE, DDL, anything that reads no
partition). Bind markers (`?`, `:name`) are numbered in text order across the whole statement, as the protocol
binds them. `parse_schema(text)` reads the `CREATE TABLE` statements of a schema file (`DESCRIBE` output) into
each table's partition key columns and their CQL types. Problems are `CqlError`s with the 1-based line (within
the text) where they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "Access",
    "Batch",
    "CqlError",
    "Literal",
    "Marker",
    "Other",
    "Parsed",
    "Table",
    "Term",
    "Token",
    "parse_schema",
    "parse_statement",
    "split_name",
    "tokenize",
]


class CqlError(ValueError):
    """A statement or schema this module cannot read; `line` is 1-based within the text."""

    def __init__(self, message: str, line: int = 1) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class Token:
    kind: str  # ident, qident (quoted identifier), string, number, uuid, blob, marker, named, op, end
    text: str  # identifiers unquoted (quoted ones keep their case), strings unescaped, numbers as written
    line: int
    marker: int = -1  # bind markers: their 0-based position in the statement

    def word(self, *words: str) -> bool:
        """An unquoted keyword among `words` (lower case)."""
        return self.kind == "ident" and self.text.lower() in words


_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<comment>--[^\n]*|//[^\n]*|/\*.*?\*/)
  | (?P<string>'(?:[^']|'')*')
  | (?P<dollar>\$\$.*?\$\$)
  | (?P<qident>"(?:[^"]|"")*")
  | (?P<uuid>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-]))
  | (?P<blob>0[xX][0-9a-fA-F]*(?![\w]))
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?![\w]))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<named>:[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op><=|>=|!=|[=<>(),.;?\[\]{}*+\-:/%])
    """,
    re.VERBOSE | re.DOTALL,
)


def tokenize(text: str) -> list[Token]:
    """The tokens of `text` (comments and spaces dropped), ending with an `end` token."""
    out: list[Token] = []
    pos, line, markers = 0, 1, 0
    n = len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            ch = text[pos]
            if ch in "'\"" or text.startswith("/*", pos) or text.startswith("$$", pos):
                raise CqlError(f"unterminated {_WHAT.get(ch, 'comment or string')} in the statement", line)
            raise CqlError(f"unexpected character {ch!r} in the statement", line)
        kind = m.lastgroup or ""
        raw = m.group()
        if kind == "string":
            out.append(Token("string", raw[1:-1].replace("''", "'"), line))
        elif kind == "dollar":
            out.append(Token("string", raw[2:-2], line))
        elif kind == "qident":
            out.append(Token("qident", raw[1:-1].replace('""', '"'), line))
        elif kind in ("uuid", "blob", "number", "ident"):
            out.append(Token(kind, raw, line))
        elif kind == "named":
            out.append(Token("marker", raw[1:], line, markers))
            markers += 1
        elif kind == "op":
            if raw == "?":
                out.append(Token("marker", "?", line, markers))
                markers += 1
            else:
                out.append(Token("op", raw, line))
        line += raw.count("\n")
        pos = m.end()
    out.append(Token("end", "", line))
    return out


_WHAT: Final = {"'": "string", '"': "quoted identifier"}


# ------------------------------------------------------------------------------------------------ statements


@dataclass(frozen=True)
class Marker:
    """A bind marker: the statement's `index`-th bound value."""

    index: int
    name: str | None = None
    line: int = 1


@dataclass(frozen=True)
class Literal:
    """A constant as written: kind is string, number, uuid, blob, bool or null (`negative` for a leading minus)."""

    kind: str
    text: str
    line: int = 1


Term = Marker | Literal


@dataclass(frozen=True)
class Access:
    """One statement's table and the terms it gives its columns.

    `columns` maps a column (its internal name: unquoted names lower-cased) to its terms: one for `=` (or an
    INSERT's value), several for `IN (...)`; `in_list` names the columns restricted by `IN ?` (one bound list).
    `in_columns` names every column restricted by `IN`; `other` every column the WHERE clause restricts
    otherwise (ranges, CONTAINS, a function's result, ...).
    """

    op: str  # get, set, delete
    keyspace: str | None
    table: str
    columns: dict[str, tuple[Term, ...]]
    in_list: frozenset[str] = frozenset()
    in_columns: frozenset[str] = frozenset()  # every column restricted by IN (a list or one bound list)
    other: frozenset[str] = frozenset()  # columns restricted other than by = / IN
    token: bool = False  # a token(...) restriction: a range of the ring, no partition named
    json: bool = False  # INSERT JSON: the columns are inside a JSON document
    line: int = 1


@dataclass(frozen=True)
class Batch:
    """A `BEGIN BATCH ... APPLY BATCH` text: its statements (markers numbered across the whole text)."""

    statements: tuple[Access | Other, ...]


@dataclass(frozen=True)
class Other:
    """A statement that reads or writes no partition of a table (USE, DDL, ...): `what` is its first word."""

    what: str


Parsed = Access | Batch | Other


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.t = tokens
        self.i = 0

    @property
    def cur(self) -> Token:
        return self.t[self.i]

    def next(self) -> Token:
        tok = self.t[self.i]
        if tok.kind != "end":
            self.i += 1
        return tok

    def error(self, what: str, tok: Token | None = None) -> CqlError:
        tok = tok or self.cur
        shown = "the end of the statement" if tok.kind == "end" else repr(tok.text)
        return CqlError(f"expected {what}, found {shown}", tok.line)

    def expect_word(self, *words: str) -> Token:
        if not self.cur.word(*words):
            raise self.error(" or ".join(w.upper() for w in words))
        return self.next()

    def expect_op(self, op: str) -> Token:
        if not (self.cur.kind == "op" and self.cur.text == op):
            raise self.error(f"'{op}'")
        return self.next()

    def at_op(self, op: str) -> bool:
        return self.cur.kind == "op" and self.cur.text == op

    def name(self, what: str = "a name") -> str:
        tok = self.cur
        if tok.kind == "ident":
            self.next()
            return tok.text.lower()
        if tok.kind == "qident":
            self.next()
            return tok.text
        raise self.error(what)

    def table_ref(self) -> tuple[str | None, str]:
        first = self.name("a table name")
        if self.at_op("."):
            self.next()
            return first, self.name("a table name")
        return None, first

    def skip_group(self) -> None:
        """Skip one token, or a whole bracketed group starting here."""
        opening = {"(": ")", "[": "]", "{": "}"}
        tok = self.next()
        if tok.kind != "op" or tok.text not in opening:
            return
        stack = [opening[tok.text]]
        while stack:
            tok = self.next()
            if tok.kind == "end":
                raise CqlError(f"unbalanced '{tok.text or '('}' in the statement", tok.line)
            if tok.kind == "op" and tok.text in opening:
                stack.append(opening[tok.text])
            elif tok.kind == "op" and tok.text == stack[-1]:
                stack.pop()

    def skip_until(self, stop: set[str], ops: frozenset[str] | set[str] = frozenset()) -> None:
        """Skip tokens (and bracketed groups) up to a keyword of `stop`, an operator of `ops`, `;` or the end."""
        while True:
            tok = self.cur
            if tok.kind == "end" or (tok.kind == "op" and tok.text in (";", *ops)) or tok.word(*stop):
                return
            self.skip_group()

    def term(self) -> Term | None:
        """A bind marker or a constant; None (nothing consumed beyond it) for anything else (a function call,
        a collection literal, a cast...)."""
        tok = self.cur
        if tok.kind == "marker":
            self.next()
            return Marker(tok.marker, None if tok.text == "?" else tok.text, tok.line)
        if tok.kind == "op" and tok.text == "-" and self.t[self.i + 1].kind == "number":
            self.next()
            num = self.next()
            return Literal("number", "-" + num.text, num.line)
        if tok.kind in ("string", "number", "uuid", "blob"):
            self.next()
            return Literal(tok.kind, tok.text, tok.line)
        if tok.word("true", "false"):
            self.next()
            return Literal("bool", tok.text.lower(), tok.line)
        if tok.word("null"):
            self.next()
            return Literal("null", "null", tok.line)
        if tok.word("nan", "infinity"):
            self.next()
            return Literal("number", tok.text, tok.line)
        self.skip_group()
        if self.at_op("("):  # a function call: name(args)
            self.skip_group()
        return None

    def where(self) -> tuple[dict[str, tuple[Term, ...]], set[str], set[str], set[str], bool]:
        """Relations up to the end of the WHERE clause: =/IN terms per column, `IN ?` columns, other columns,
        and whether there is a token() restriction."""
        columns: dict[str, tuple[Term, ...]] = {}
        in_list: set[str] = set()
        in_columns: set[str] = set()
        other: set[str] = set()
        token = False
        ends = {"group", "order", "per", "limit", "allow", "if", "using", "apply", "begin"}
        while True:
            tok = self.cur
            if tok.word("token") and self.t[self.i + 1].kind == "op" and self.t[self.i + 1].text == "(":
                token = True
                self.skip_until({"and", *ends})
            elif tok.kind in ("ident", "qident") and not tok.word(*ends):
                column = self.name()
                if self.at_op("="):
                    self.next()
                    term = self.term()
                    if term is None:
                        other.add(column)
                        self.skip_until({"and", *ends})
                    else:
                        columns[column] = (term,)
                elif self.cur.word("in"):
                    self.next()
                    in_columns.add(column)
                    if self.cur.kind == "marker":
                        m = self.next()
                        columns[column] = (Marker(m.marker, None if m.text == "?" else m.text, m.line),)
                        in_list.add(column)
                    elif self.at_op("("):
                        self.next()
                        terms: list[Term] = []
                        complex_term = False
                        while not self.at_op(")"):
                            term = self.term()
                            if term is None:
                                complex_term = True
                            else:
                                terms.append(term)
                            if self.at_op(","):
                                self.next()
                            elif not self.at_op(")"):
                                raise self.error("',' or ')' in an IN list")
                        self.next()
                        if complex_term:
                            other.add(column)
                        else:
                            columns[column] = tuple(terms)
                    else:
                        other.add(column)
                        self.skip_until({"and", *ends})
                else:
                    other.add(column)
                    self.skip_until({"and", *ends})
            else:  # (a, b) IN ..., a[...] = ..., or what we do not read
                self.skip_until({"and", *ends})
            if self.cur.word("and"):
                self.next()
                continue
            return columns, in_list, in_columns - other, other, token

    def statement(self) -> Parsed:
        tok = self.cur
        if tok.word("select"):
            return self.select()
        if tok.word("insert"):
            return self.insert()
        if tok.word("update"):
            return self.update()
        if tok.word("delete"):
            return self.delete()
        if tok.word("begin"):
            return self.batch()
        return Other(tok.text.upper() if tok.kind != "end" else "(empty)")

    def select(self) -> Access:
        start = self.next()
        self.skip_until({"from"})
        self.expect_word("from")
        ks, table = self.table_ref()
        columns: dict[str, tuple[Term, ...]] = {}
        in_list: set[str] = set()
        in_columns: set[str] = set()
        other: set[str] = set()
        token = False
        if self.cur.word("where"):
            self.next()
            columns, in_list, in_columns, other, token = self.where()
        self.skip_until(set())
        return Access(
            "get", ks, table, columns, frozenset(in_list), frozenset(in_columns), frozenset(other), token,
            line=start.line,
        )

    def insert(self) -> Access:
        start = self.next()
        self.expect_word("into")
        ks, table = self.table_ref()
        if self.cur.word("json"):
            self.skip_until({"apply", "begin"})
            return Access("set", ks, table, {}, json=True, line=start.line)
        self.expect_op("(")
        names: list[str] = [self.name("a column name")]
        while self.at_op(","):
            self.next()
            names.append(self.name("a column name"))
        self.expect_op(")")
        self.expect_word("values")
        self.expect_op("(")
        terms: list[Term | None] = []
        while True:
            terms.append(self.term())
            if self.at_op(","):
                self.next()
                continue
            self.expect_op(")")
            break
        if len(terms) != len(names):
            raise CqlError(f"INSERT names {len(names)} columns but gives {len(terms)} values", start.line)
        self.skip_until({"apply", "begin"})
        columns: dict[str, tuple[Term, ...]] = {n: (t,) for n, t in zip(names, terms, strict=True) if t is not None}
        other = frozenset(n for n, t in zip(names, terms, strict=True) if t is None)
        return Access("set", ks, table, columns, other=other, line=start.line)

    def update(self) -> Access:
        start = self.next()
        ks, table = self.table_ref()
        self.skip_until({"set"})
        self.expect_word("set")
        self.skip_until({"where"})
        self.expect_word("where")
        columns, in_list, in_columns, other, token = self.where()
        self.skip_until({"apply", "begin"})
        return Access(
            "set", ks, table, columns, frozenset(in_list), frozenset(in_columns), frozenset(other), token,
            line=start.line,
        )

    def delete(self) -> Access:
        start = self.next()
        self.skip_until({"from"})
        self.expect_word("from")
        ks, table = self.table_ref()
        self.skip_until({"where"})
        self.expect_word("where")
        columns, in_list, in_columns, other, token = self.where()
        self.skip_until({"apply", "begin"})
        return Access(
            "delete", ks, table, columns, frozenset(in_list), frozenset(in_columns), frozenset(other), token,
            line=start.line,
        )

    def batch(self) -> Batch:
        self.next()
        if self.cur.word("unlogged", "counter", "logged"):
            self.next()
        self.expect_word("batch")
        if self.cur.word("using"):
            self.skip_until({"select", "insert", "update", "delete"})
        statements: list[Access | Other] = []
        while True:
            while self.at_op(";"):
                self.next()
            if self.cur.word("apply"):
                self.next()
                self.expect_word("batch")
                break
            if self.cur.kind == "end":
                raise self.error("APPLY BATCH")
            inner = self.statement()
            if isinstance(inner, Batch):
                raise CqlError("a batch inside a batch", self.cur.line)
            if isinstance(inner, Other):
                self.skip_until({"apply"}, {";"})
            statements.append(inner)
        return Batch(tuple(statements))


_FIRST_WORD: Final = re.compile(r"(?:\s+|--[^\n]*|//[^\n]*|/\*.*?\*/)*([A-Za-z]*)", re.DOTALL)
_DATA: Final = frozenset({"select", "insert", "update", "delete", "begin"})


def parse_statement(text: str) -> tuple[Parsed, int]:
    """What one logged statement touches (see the module doc) and its number of bind markers (-1 for a statement
    that touches no partition, which is not read further); CqlError when it cannot be read."""
    m = _FIRST_WORD.match(text)
    word = m.group(1).lower() if m else ""
    if word not in _DATA:
        return Other(word.upper() or "(empty)"), -1
    tokens = tokenize(text)
    p = _Parser(tokens)
    parsed = p.statement()
    while p.at_op(";"):
        p.next()
    if not isinstance(parsed, Other) and p.cur.kind != "end":
        raise p.error("the end of the statement")
    return parsed, sum(1 for t in tokens if t.kind == "marker")


# ------------------------------------------------------------------------------------------------ schema


@dataclass(frozen=True)
class Table:
    """A table's partition key: its columns (in key order) and their CQL types (lower case, as written)."""

    keyspace: str
    name: str
    partition_key: tuple[str, ...]
    types: dict[str, str] = field(default_factory=dict)
    line: int = 1

    @property
    def qualified(self) -> str:
        return f"{self.keyspace}.{self.name}"


def _type(p: _Parser) -> str:
    """A column type as written (`frozen<tuple<int, text>>`), lower-cased outside quoted names."""
    parts: list[str] = []
    depth = 0
    while True:
        tok = p.cur
        if tok.kind == "end":
            raise p.error("a column type")
        if tok.kind == "op" and tok.text in (",", ")") and depth == 0:
            break
        if tok.kind == "ident" and depth == 0 and tok.word("primary", "static"):
            break
        p.next()
        if tok.kind == "op" and tok.text == "<":
            depth += 1
        elif tok.kind == "op" and tok.text == ">":
            depth -= 1
        parts.append(tok.text.lower() if tok.kind == "ident" else tok.text)
    if not parts:
        raise p.error("a column type")
    return "".join(", " if part == "," else part for part in parts)


def _create_table(p: _Parser, keyspace: str | None) -> Table:
    start = p.cur
    if p.cur.word("if"):
        p.next()
        p.expect_word("not")
        p.expect_word("exists")
    ks, name = p.table_ref()
    ks = ks or keyspace
    if ks is None:
        raise CqlError(f"CREATE TABLE {name} names no keyspace and no USE comes before it", start.line)
    p.expect_op("(")
    types: dict[str, str] = {}
    key: list[str] | None = None
    while True:
        if p.cur.word("primary"):
            if key is not None:
                raise CqlError(f"table {ks}.{name} declares its primary key twice", p.cur.line)
            p.next()
            p.expect_word("key")
            p.expect_op("(")
            if p.at_op("("):
                p.next()
                key = [p.name("a column name")]
                while p.at_op(","):
                    p.next()
                    key.append(p.name("a column name"))
                p.expect_op(")")
            else:
                key = [p.name("a column name")]
            p.skip_until(set(), {")"})  # the clustering columns
            p.expect_op(")")
        else:
            column = p.name("a column name")
            types[column] = _type(p)
            while p.cur.word("static", "primary", "key"):
                if p.cur.word("primary"):
                    p.next()
                    p.expect_word("key")
                    if key is not None:
                        raise CqlError(f"table {ks}.{name} declares its primary key twice", p.cur.line)
                    key = [column]
                else:
                    p.next()
        if p.at_op(","):
            p.next()
            if p.at_op(")"):
                break
            continue
        break
    p.expect_op(")")
    if key is None:
        raise CqlError(f"table {ks}.{name} has no PRIMARY KEY", start.line)
    for column in key:
        if column not in types:
            raise CqlError(f"table {ks}.{name}: key column {column!r} is not a column of the table", start.line)
    return Table(ks, name, tuple(key), {c: types[c] for c in key}, start.line)


def parse_schema(text: str, keyspace: str | None = None) -> dict[str, Table]:
    """`keyspace.table` → its partition key, from the `CREATE TABLE` statements of `text` (other statements —
    CREATE KEYSPACE, TYPE, INDEX, ... — are skipped; `keyspace`, then each `USE ks;`, is the keyspace of
    unqualified names)."""
    tokens = tokenize(text)
    p = _Parser(tokens)
    tables: dict[str, Table] = {}
    while p.cur.kind != "end":
        if p.at_op(";"):
            p.next()
            continue
        tok = p.cur
        if tok.word("use"):
            p.next()
            keyspace = p.name("a keyspace name")
        elif tok.word("create") and p.t[p.i + 1].word("table", "columnfamily"):
            p.next()
            p.next()
            table = _create_table(p, keyspace)
            if table.qualified in tables:
                raise CqlError(f"table {table.qualified} is created twice", table.line)
            tables[table.qualified] = table
        p.skip_until(set())
    return tables


def split_name(text: str) -> tuple[str, str]:
    """`KS.T` (as `--table` takes it: CQL names, unquoted ones case-insensitive) → (keyspace, table)."""
    try:
        tokens = tokenize(text)
    except CqlError as exc:
        raise CqlError(f"'{text}' is not KEYSPACE.TABLE: {exc}") from None
    p = _Parser(tokens)
    try:
        ks, name = p.table_ref()
    except CqlError:
        raise CqlError(f"'{text}' is not KEYSPACE.TABLE") from None
    if ks is None or p.cur.kind != "end":
        raise CqlError(f"'{text}' is not KEYSPACE.TABLE")
    return ks, name
