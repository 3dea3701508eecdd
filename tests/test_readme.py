"""The README opens with the two commands a fresh machine needs, and CI runs the second
one verbatim; its rule workflow (write, lint, fuse, check a rule; check every shipped
rule file) runs as written."""

import contextlib
import glob
import io
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    first_section = text.split("## Quick start")[0]
    return re.findall(r"```bash\n(.+?)\n```", first_section, flags=re.S)


def test_readme_opens_with_exactly_two_commands():
    commands = readme_commands()
    assert len(commands) == 2
    assert commands[0].endswith("fusionlang demo")
    assert "'.[test]'" in commands[1] and commands[1].endswith("pytest")


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == readme_commands()[1]


# ----- the rule workflow of "Write a rule" and "Check a rule", run as written ---------------
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def readme_rule_file() -> tuple[str, str]:
    """(name, text) of the README's one ``fuse`` block, which names its file on line 1."""
    (text,) = [body for lang, body in FENCE.findall((ROOT / "README.md").read_text()) if lang == "fuse"]
    return re.match(r"# (\S+\.fuse)\n", text).group(1), text


def readme_console(name: str) -> list[tuple[str, list[str]]]:
    """Each ``$ fusionlang ...`` command of the README's console blocks that uses the rule
    file ``name``, with the output lines the README shows under it."""
    found: list[tuple[str, list[str]]] = []
    for lang, body in FENCE.findall((ROOT / "README.md").read_text()):
        for line in body.splitlines() if lang == "console" else []:
            if line.startswith("$ "):
                found.append((line[2:], []))
            elif found:
                found[-1][1].append(line)
    return [(command, shown) for command, shown in found if name in command.split()]


def run_cli(words: list[str]) -> tuple[int, str]:
    from fusionlang.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(words)
    return status, out.getvalue()


def test_the_rule_workflow_runs_as_written(tmp_path, monkeypatch):
    from small_models import silu_model

    name, text = readme_rule_file()
    (tmp_path / name).write_text(text)
    model = silu_model(tmp_path / "x_sigmoid_x.onnx")  # a real model where the README says model.onnx
    monkeypatch.chdir(tmp_path)
    commands = readme_console(name)
    assert [shlex.split(c)[1] for c, _ in commands] == ["lint", "fuse", "check"]
    for command, shown in commands:
        words = [model if w == "model.onnx" else w for w in shlex.split(command)]
        assert words[0] == "fusionlang"
        status, out = run_cli(words[1:])
        assert status == 0, f"{command}\n{out}"
        assert all(line in out.splitlines() for line in shown), f"{command}\n{out}"
        if words[1] in ("fuse", "check"):
            assert "to_silu" in out, f"{command}: the rule neither fired nor was checked\n{out}"


def test_the_check_of_every_shipped_rule_file_runs_as_written(monkeypatch):
    # the README's command, with fewer instances and rounds (the full run takes minutes; the
    # counts of proved and checked rules depend on them, the number of rules does not)
    text = " ".join((ROOT / "README.md").read_text().split())
    command, rules = re.search(r"`(fusionlang check fusionlang/rules/\*\.fuse)`: (\d+) rules", text).groups()
    monkeypatch.chdir(ROOT)
    words = [expanded for word in shlex.split(command) for expanded in (sorted(glob.glob(word)) or [word])]
    status, out = run_cli([*words[1:], "--examples", "10", "--budget", "2"])
    assert status == 0, out
    assert re.search(rf"\d+ file\(s\), {rules} rule\(s\): .* 0 failed", out.splitlines()[-1]), out.splitlines()[-1]
