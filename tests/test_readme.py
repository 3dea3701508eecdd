"""The README opens with the two commands a fresh machine needs, and CI runs the second
one verbatim."""

import re
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
