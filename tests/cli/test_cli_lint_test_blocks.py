"""`fusionlang lint` runs the test blocks of the files it lints (as the tutorial says): a
failing block is an error at the failing expectation's file:line:col, exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys

from fusionlang.cli import main

RULE = "rewrite drop: identity(x) => x\n"


def block(expectation: str) -> str:
    return ("test t {\n    input x: f32[3]\n    y = exp(identity(x))\n    output y\n"
            f"    expect {expectation}\n}}\n")


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_failing_test_block_is_an_error_at_its_expectation(tmp_path, capsys):
    path = write(tmp_path, "t.fuse", RULE + block("fired(drop) == 2"))
    assert main(["lint", path]) == 2
    out, err = capsys.readouterr()
    assert f"{path}:6:5: error: test t.fuse::t failed: expect fired(drop) == 2 failed: fired(drop) is 1" in err
    assert "^~~" in err and "Traceback" not in err
    assert out.strip() == "1 file(s): 1 error(s), 0 warning(s)"


def test_passing_test_blocks_are_counted_in_the_json(tmp_path, capsys):
    path = write(tmp_path, "t.fuse", RULE + block("fired(drop) == 1 and equivalent"))
    assert main(["--json", "lint", path]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["errors"], report["diagnostics"]) == (0, [])
    assert report["tests_run"] == 1


def test_the_blocks_of_imported_files_run_in_the_importing_rule_set(tmp_path, capsys):
    # the imported file's own test passes alone; the importing file's rule breaks it
    base = write(tmp_path, "base.fuse", RULE + block("fired(drop) == 1"))
    write(tmp_path, "top.fuse", 'import "base.fuse"\nrewrite mine priority 10: identity(x) => x\n')
    assert main(["lint", base]) == 0
    assert main(["lint", str(tmp_path / "top.fuse")]) == 2
    assert f"{base}:6:5: error: test base.fuse::t failed: expect fired(drop) == 1 failed" in capsys.readouterr().err


def test_a_file_with_lint_errors_reports_them_without_running_its_tests(tmp_path, capsys):
    path = write(tmp_path, "t.fuse", "rewrite drop: identiti(x) => x\n" + block("fired(drop) == 2"))
    assert main(["--json", "lint", path]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["tests_run"] == 0
    assert [d["message"] for d in report["diagnostics"]] == ["unknown op 'identiti'"]


def test_lint_runs_test_blocks_without_hypothesis(tmp_path):
    # hypothesis is an optional extra; lint and its test runner must not need it
    path = write(tmp_path, "t.fuse", RULE + block("fired(drop) == 2"))
    code = ("import sys; sys.modules['hypothesis'] = None\n"
            "from fusionlang.cli import main\n"
            f"sys.exit(main(['lint', {path!r}]))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "test t.fuse::t failed: expect fired(drop) == 2" in result.stderr and "Traceback" not in result.stderr


def test_a_failing_block_is_named_by_its_file_beside_an_imported_block_of_its_name(tmp_path, capsys):
    write(tmp_path, "base.fuse", RULE + block("fired(drop) == 1"))
    top = write(tmp_path, "top.fuse", 'import "base.fuse"\n' + block("fired(drop) == 3"))
    assert main(["lint", top]) == 2
    err = capsys.readouterr().err
    assert f"{top}:6:5: error: test top.fuse::t failed: expect fired(drop) == 3 failed" in err
    assert "base.fuse::t failed" not in err
