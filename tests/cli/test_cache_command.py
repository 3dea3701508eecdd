"""`fusionlang cache info|clear` as a user sees it, and commands that compile with a cache
they cannot use: one notice line, never an internal error."""

from __future__ import annotations

import json
import os

import pytest
from cli_helpers import conv_bn_pool_model, one_line_error, run_cli

from fusionlang.backend.ccompile import build_library
from fusionlang.cli import main

SOURCES = ["int answer(void) { return 42; }\n", "int answer(void) { return 7; }\n"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSIONLANG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def cli_json(capsys, *argv) -> dict:
    assert main(["--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_info_shows_the_path_entries_limit_and_status(cache, capsys, monkeypatch):
    monkeypatch.setenv("FUSIONLANG_CACHE_MAX_BYTES", "1048576")
    for source in SOURCES:
        build_library([source])
    assert main(["cache", "info"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"kernel cache: {cache / 'c'}"
    assert lines[1].startswith("entries: 2 (") and lines[1].endswith(" KiB)")
    assert lines[2:] == ["limit: 1.00 MiB (FUSIONLANG_CACHE_MAX_BYTES)", "status: in use"]
    info = cli_json(capsys, "cache", "info")
    assert info["path"] == str(cache / "c") and info["entries"] == 2 and info["bytes"] > 2 * 1000
    assert info["limit"] == 1048576 and info["in_use"] is True and info["problem"] is None


def test_info_says_why_a_cache_is_not_used(cache, capsys):
    cache.mkdir(mode=0o700)
    os.chmod(cache, 0o1777)
    assert main(["cache", "info"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"status: not used: {cache} is writable by others (mode 1777)"
    info = cli_json(capsys, "cache", "info")
    assert info["in_use"] is False and info["problem"] == f"{cache} is writable by others (mode 1777)"


def test_clear_removes_the_entries_and_says_what_it_freed(cache, capsys):
    libraries = [build_library([source]) for source in SOURCES]
    assert main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"removed 2 entries from {cache / 'c'}, freed ") and out.endswith(" KiB\n")
    assert not any(lib.exists() for lib in libraries) and not list((cache / "c").iterdir())
    build_library(SOURCES[:1])
    cleared = cli_json(capsys, "cache", "clear")
    assert cleared["path"] == str(cache / "c") and cleared["removed"] == 1 and cleared["freed_bytes"] > 1000
    assert cli_json(capsys, "cache", "clear")["removed"] == 0


def test_clear_leaves_a_cache_it_does_not_trust_alone(cache, capsys):
    library = build_library(SOURCES[:1])
    os.chmod(cache / "c", 0o777)
    line = one_line_error(capsys, ["cache", "clear"])
    assert line == f"fusionlang: error: kernel cache {cache / 'c'} is writable by others (mode 777); not clearing it"
    assert library.exists()


@pytest.mark.parametrize("argv, says", [
    (["cache"], "the following arguments are required: action (see fusionlang cache --help)"),
    (["cache", "purge"], "argument action: invalid choice: 'purge' (choose from 'info', 'clear')"),
    (["cache", "info", "extra"], "unrecognized arguments: extra")])
def test_a_bad_action_exits_2(cache, capsys, argv, says):
    assert one_line_error(capsys, argv).startswith(f"fusionlang: error: {says}")


def test_a_bad_size_limit_exits_2(cache, capsys, monkeypatch):
    monkeypatch.setenv("FUSIONLANG_CACHE_MAX_BYTES", "lots")
    assert one_line_error(capsys, ["cache", "info"]) == (
        "fusionlang: error: FUSIONLANG_CACHE_MAX_BYTES='lots': expected a number of bytes")


def test_run_with_a_cache_path_that_is_a_file_still_compiles(tmp_path):
    model = conv_bn_pool_model(tmp_path / "m.onnx")
    blocker = tmp_path / "cache"
    blocker.write_text("a file, not a directory")
    proc = run_cli("run", model, "--random-inputs", "0", "--check",
                   env=dict(os.environ, FUSIONLANG_CACHE_DIR=str(blocker)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (f"fusionlang: kernel cache {blocker} is not a directory; not using it: compiling in a "
                           "private temporary directory, removed at exit\n")
