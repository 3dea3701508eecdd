"""Fuzzing the front end with text from the grammar itself (extends the character-level
mutation test in tests/lang/test_tutorial_and_robustness.py): generated programs,
token-level mutations of the standard library and of generated programs. Whatever the
text, loading it either succeeds or raises a RuleError whose diagnostics render; and a
rule set that loads can be checked without the checker crashing.

Budget: hypothesis's examples per test follow the profile (ci: bounded; thorough: long)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fusionlang.errors import FuseError, RuleError
from fusionlang.lang import parse_text, render
from fusionlang.lang.loader import resolve, standard_names
from fusionlang.testing import check_rules, fuse_sources, hostile_sources, mutated_sources
from fusionlang.testing.checker import STATUSES

STDLIB = [Path(resolve(n)).read_text() for n in standard_names()]
#: examples per fuzz test: 10x the profile's (a parse takes milliseconds)
EXAMPLES = settings.default.max_examples * 10
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                            HealthCheck.data_too_large])


def load_or_diagnose(text: str, path: str = "fuzz.fuse"):
    """The rule set, or None after checking the RuleError is well formed."""
    try:
        return parse_text(text, path)
    except RuleError as exc:
        assert exc.diagnostics, "a RuleError without diagnostics"
        for diag in exc.diagnostics:
            assert str(diag).split(":")[0] in (path, "std") or ".fuse:" in str(diag)
            render(diag)
            render(diag, color=True)
        return None


@FUZZ
@given(fuse_sources())
def test_generated_programs_load_or_diagnose(text):
    load_or_diagnose(text)


@FUZZ
@given(mutated_sources(STDLIB))
def test_token_mutations_of_the_standard_library_load_or_diagnose(text):
    load_or_diagnose(text)


@FUZZ
@given(st.data())
def test_token_mutations_of_generated_programs_load_or_diagnose(data):
    base = data.draw(fuse_sources(max_items=4))
    load_or_diagnose(data.draw(mutated_sources([base or "rewrite r: relu(x) => x"])))


@settings(max_examples=max(15, EXAMPLES // 25), deadline=None, suppress_health_check=list(HealthCheck))
@given(fuse_sources(max_items=5))
def test_the_checker_never_crashes_on_a_rule_set_that_loads(text):
    rules = load_or_diagnose(text)
    assume(rules is not None)
    try:
        report = check_rules(rules, max_examples=3, kinds=("rewrite", "decompose", "def", "fuse"))
    except FuseError:
        return  # e.g. a rule set whose rewrites loop: reported to the user as such
    # every check ends in a status the report knows; "under-covered" is one (the drawing ran
    # out of time: a loaded machine, CI with another job beside it)
    assert all(c.status in STATUSES for c in report.checks)


def test_the_generator_speaks_the_grammar():
    # grammar-aware generation: nearly every program gets past the parser to the checker,
    # and some load cleanly, so the fuzzer reaches code a random byte string never would
    # (400 programs, half of them importing std/ops.fuse first; how many load swings between
    # runs, 4 to 16 measured, because hypothesis also draws from the constants of whatever
    # modules the earlier tests imported)
    loaded = syntax = 0
    samples = []

    @settings(max_examples=400, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(fuse_sources())
    def collect(text):
        samples.append(text)

    collect()
    for text in samples:
        try:
            parse_text(text, "gen.fuse")
            loaded += 1
        except RuleError as exc:
            syntax += any(d.message.startswith("unexpected ") for d in exc.diagnostics)
    assert loaded >= 3, loaded  # of 400
    assert syntax <= len(samples) // 10, syntax


def _small_graph():
    from fusionlang.ops import GraphBuilder

    b = GraphBuilder()
    x, y = b.input("x", (4,)), b.input("y", (4,))
    b.output(b.mul(b.add(x, y, name="a"), y, name="m"))
    return b.build()


@settings(max_examples=max(20, EXAMPLES // 4), deadline=None, suppress_health_check=list(HealthCheck))
@given(hostile_sources())
def test_hostile_programs_load_or_diagnose_and_rewrite_within_bounds(text):
    """Deep, huge and exploding programs: loading raises only a RuleError with located
    diagnostics (never RecursionError, MemoryError or a hang), and a rule set that loads
    rewrites a graph or stops with a FuseError."""
    from fusionlang.engine.rewrite import apply_rules

    rules = load_or_diagnose(text)
    if rules is None:
        return
    try:
        apply_rules(_small_graph(), rules)
    except FuseError:
        pass
