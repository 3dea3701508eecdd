"""fusionlang.instrument: stage loggers, the pass-timing collection, FUSIONLANG_LOG."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest

import fusionlang as fl
from fusionlang.instrument import collect_timings, configure, configure_from_environment, logger, timed
from fusionlang.stages import STAGES


pytestmark = pytest.mark.usefixtures("restore_fusionlang_logging")


@pytest.fixture(scope="module")
def demo_graph():
    return fl.from_onnx(Path(fl.__file__).parent / "data" / "demo_block.onnx")


def test_every_stage_has_a_logger_and_no_other_name_does():
    assert [logger(s).name for s in STAGES] == [f"fusionlang.{s}" for s in STAGES]
    with pytest.raises(ValueError, match="unknown stage 'lowering'"):
        logger("lowering")


def test_nested_passes_are_rows_of_their_own_with_calls_summed():
    with collect_timings() as t:
        for _ in range(3):
            with timed("partition", "feedback"):
                with timed("codegen", "search"):
                    pass
        with timed("codegen", "search"):
            pass
    assert [(r["stage"], r["pass"], r["calls"]) for r in t.rows()] == [
        ("partition", "feedback", 3), ("codegen", "feedback > search", 3), ("codegen", "search", 1)]
    lines = t.table().splitlines()
    assert lines[0].split() == ["stage", "pass", "calls", "wall", "cpu"]
    assert lines[2].startswith("codegen      search")  # indented under its outer pass


def test_a_pass_that_raises_is_counted_and_leaves_the_nesting_clean():
    with collect_timings() as t:
        with pytest.raises(KeyError):
            with timed("rewrite", "simplify"):
                raise KeyError("x")
        with timed("rewrite", "dead code"):
            pass
    assert [r["pass"] for r in t.rows()] == ["simplify", "dead code"]


def test_nothing_is_collected_outside_a_collection_or_in_another_thread():
    with timed("rewrite", "before"):
        pass
    def elsewhere():
        with timed("rewrite", "elsewhere"):
            pass

    with collect_timings() as t:
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
    assert t.rows() == []


def test_the_pipeline_times_each_stage(demo_graph):
    with collect_timings() as t:
        compiled = fl.compile(fl.fuse(demo_graph))
    stages = {r["stage"] for r in t.rows()}
    assert {"rewrite", "partition", "codegen", "compile"} <= stages
    passes = {r["pass"] for r in t.rows()}
    assert {"simplify", "strategy apollo", "lower groups", "plan buffers", "C compiler"} <= passes
    printed = next(r for r in t.rows() if r["pass"] == "print C")
    assert printed["calls"] == len(compiled.plan.groups)


def test_info_lines_say_what_each_stage_decided(demo_graph):
    stream = io.StringIO()
    configure("info", stream)
    plan = fl.fuse(demo_graph)
    fl.compile(plan)
    lines = stream.getvalue().splitlines()
    assert f"fusionlang.partition: apollo: {len(demo_graph.nodes)} ops -> {plan.launches} kernels " \
           f"in {len(plan.groups)} groups (before fusion: {plan.stats.kernels_before} kernels), " \
           "0 backend refusals" in lines
    assert any(line.startswith("fusionlang.rewrite: ") and "stop: fixpoint" in line for line in lines)
    assert any(line.startswith("fusionlang.codegen: c: ") for line in lines)
    assert not any(": simplify: " in line for line in lines)  # pass times are DEBUG


def test_debug_lines_time_each_pass_with_what_it_worked_on(demo_graph):
    stream = io.StringIO()
    configure("debug", stream)
    fl.compile(fl.fuse(demo_graph))
    text = stream.getvalue()
    assert "fusionlang.rewrite: simplify: " in text
    assert "fusionlang.codegen: print C (group 0): " in text


def test_silent_by_default_and_off_silences(demo_graph, capsys):
    fl.fuse(demo_graph)
    stream = io.StringIO()
    configure("off", stream)
    fl.fuse(demo_graph)
    assert stream.getvalue() == "" and capsys.readouterr().err == ""


def test_environment_setting(monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    configure_from_environment({"FUSIONLANG_LOG": "INFO"})
    logger("run").info("hello")
    assert stream.getvalue() == "fusionlang.run: hello\n"
    with pytest.raises(ValueError, match=r"FUSIONLANG_LOG='loud': expected one of debug, info"):
        configure_from_environment({"FUSIONLANG_LOG": "loud"})


def test_cpu_time_is_read_only_inside_a_collection(monkeypatch):
    # process_time is a system call (0.2 ms in a sandboxed kernel): a compiled model's
    # every run passes through timed, and nobody reads the CPU time outside a collection
    import fusionlang.instrument as instrument

    calls = []
    monkeypatch.setattr(instrument.time, "process_time", lambda: calls.append(1) or 0.0)
    with timed("run", "outside"):
        pass
    assert calls == []
    with collect_timings() as timings:
        with timed("run", "inside"):
            pass
    assert len(calls) == 2 and len(timings.rows()) == 1
