"""Cassandra's `speculative_retry` grammar (simulation.stock): exact cases from Cassandra 5.0's
SpeculativeRetryPolicy implementations, and properties (render is a fixed point, parse∘render = id)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from base.errors import BadInputError
from simulation.stock import SpeculativeRetry, parse_speculative_retry


@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        ("NEVER", "NEVER"),
        ("never", "NEVER"),
        ("NONE", "NEVER"),
        ("None", "NEVER"),
        ("ALWAYS", "ALWAYS"),
        ("always", "ALWAYS"),
        ("99p", "99p"),
        ("99P", "99p"),
        ("99PERCENTILE", "99p"),
        ("99percentile", "99p"),
        ("99.0p", "99p"),
        ("99.9p", "99.9p"),
        ("99.99999p", "100p"),  # DecimalFormat("#.####") rounds the printed form
        ("0.5p", ".5p"),  # ... and prints no leading zero
        (".5p", ".5p"),
        ("50.00005p", "50.0001p"),  # HALF_EVEN on the exact double, just above the tie
        ("0.00004p", "0p"),  # valid (> 0), printed as "0" when no digit is left
        ("5ms", "5ms"),
        ("5MS", "5ms"),
        ("5.7ms", "5ms"),  # parsed as double, kept as int
        ("0ms", "0ms"),
        ("99999999999ms", "2147483647ms"),  # Java's (int) cast saturates
        ("MIN(99p,5ms)", "MIN(99p,5ms)"),
        ("min(5ms,99p)", "MIN(99p,5ms)"),
        ("MAX(5ms , 99PERCENTILE)", "MAX(99p,5ms)"),
        ("max(99.5p,\t100ms)", "MAX(99.5p,100ms)"),
    ],
)
def test_normalised_form(text: str, normalised: str) -> None:
    assert parse_speculative_retry(text).render() == normalised


@pytest.mark.parametrize(
    "text",
    [
        "",
        " 99p",
        "99p ",
        "99p\n",
        "p",
        "ms",
        "0p",
        "100p",
        "100.0PERCENTILE",
        "1.2.3p",
        ".p",
        "-5ms",
        "5s",
        "5 ms",
        "99pc",
        "MIN(99p,95p)",
        "MAX(5ms,10ms)",
        "MIN(99p)",
        "MIN(99p,5ms,7ms)",
        "MIN (99p,5ms)",
        "MIN( 99p,5ms)",
        "MIN(100p,5ms)",
        "MIN(99x,5ms)",
        "AVG(99p,5ms)",
        "MIN(ALWAYS,5ms)",
        "ALWAYS ",
        "NEVERMORE",
        "99\u0661p",  # a non-ASCII digit: [0-9] is ASCII in Java
        "5m\u017f",  # LATIN SMALL LONG S: Java's CASE_INSENSITIVE folds ASCII only
    ],
)
def test_rejected(text: str) -> None:
    with pytest.raises(BadInputError, match="speculative_retry"):
        parse_speculative_retry(text)


def test_equality_is_cassandras() -> None:
    assert parse_speculative_retry("NONE") == parse_speculative_retry("never")
    assert parse_speculative_retry("99PERCENTILE") == parse_speculative_retry("99.0p")
    assert parse_speculative_retry("MIN(5ms,99p)") == parse_speculative_retry("min(99percentile , 5.9MS)")
    assert parse_speculative_retry("MIN(99p,5ms)") != parse_speculative_retry("MAX(99p,5ms)")
    assert parse_speculative_retry("99.99999p") != parse_speculative_retry("99.9999p")
    assert hash(parse_speculative_retry("NONE")) == hash(parse_speculative_retry("NEVER"))


def test_threshold_rules() -> None:
    never, always = parse_speculative_retry("NEVER"), parse_speculative_retry("ALWAYS")
    assert never.threshold_ns(1e6, 5) is None
    assert always.threshold_ns(None, 5) == 0
    assert parse_speculative_retry("50ms").threshold_ns(None, 5) == 50_000_000
    p99 = parse_speculative_retry("99p")
    assert p99.threshold_ns(None, 7) == 7  # empty histogram: keep the existing value
    assert p99.threshold_ns(3_000_000.9, 7) == 3_000_000
    assert parse_speculative_retry("MIN(99p,5ms)").threshold_ns(9e6, 0) == 5_000_000
    assert parse_speculative_retry("MIN(99p,5ms)").threshold_ns(2e6, 0) == 2_000_000
    assert parse_speculative_retry("MAX(99p,100000ms)").threshold_ns(2e6, 0) == 100_000_000_000


_pct = st.floats(min_value=0.0001, max_value=99.9999, allow_nan=False).filter(lambda p: 0 < p < 100)
_ms = st.integers(min_value=0, max_value=2**31 - 1)
_policies = st.one_of(
    st.just(SpeculativeRetry("NEVER")),
    st.just(SpeculativeRetry("ALWAYS")),
    _pct.map(lambda p: SpeculativeRetry("PERCENTILE", percentile=p)),
    _ms.map(lambda m: SpeculativeRetry("FIXED", fixed_ms=m)),
    st.tuples(_pct, _ms, st.sampled_from(["MIN", "MAX"])).map(
        lambda t: SpeculativeRetry("HYBRID", percentile=t[0], fixed_ms=t[1], function=t[2])  # type: ignore[arg-type]
    ),
)


@given(_policies)
def test_render_is_a_fixed_point(policy: SpeculativeRetry) -> None:
    text = policy.render()
    again = parse_speculative_retry(text)
    assert again.render() == text
    assert again.kind == policy.kind
    assert again.fixed_ms == policy.fixed_ms


@given(st.integers(min_value=1, max_value=99), st.integers(min_value=0, max_value=10**6), st.data())
def test_spellings_of_one_policy_are_equal(p: int, ms: int, data: st.DataObject) -> None:
    def case(s: str) -> str:
        return "".join(c.upper() if data.draw(st.booleans()) else c.lower() for c in s)

    pct = f"{p}" + data.draw(st.sampled_from(["p", "percentile", f".{'0' * 3}p"]))
    fixed = f"{ms}ms"
    sep = data.draw(st.sampled_from([",", " ,", ", ", " \t,\n "]))
    fun = data.draw(st.sampled_from(["MIN", "MAX"]))
    a, b = data.draw(st.permutations([pct, fixed]))
    parsed = parse_speculative_retry(case(f"{fun}({a}{sep}{b})"))
    assert parsed == SpeculativeRetry("HYBRID", percentile=float(p), fixed_ms=ms, function=fun)  # type: ignore[arg-type]
    assert parsed.render() == f"{fun}({p}p,{ms}ms)"


@given(st.text(max_size=12))
def test_arbitrary_text_parses_or_is_bad_input(text: str) -> None:
    try:
        parsed = parse_speculative_retry(text)
    except BadInputError:
        return
    assert parse_speculative_retry(parsed.render()) == parsed or parsed.kind in ("PERCENTILE", "HYBRID")
