"""Every shipped policy (a rule file of fusionlang/rules with a strategy: apollo, tvm,
xla, dnnfusion, and whichever is added next) lints clean, passes a small check, and fuses
and runs a model with an ONNX Attention op, checked against the reference interpreter,
all through the CLI."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from fusionlang.cli import main
from fusionlang.lang import load_rules, rules_dir
from small_models import attention_model


def shipped_policies() -> list[str]:
    """The top-level rule files that are policies (they declare a strategy); decompose.fuse
    and simplify.fuse are libraries the policies import."""
    files = sorted(Path(rules_dir()).glob("*.fuse"))
    return [str(f) for f in files if load_rules(str(f)).strategies]


POLICIES = shipped_policies()


def cli(*args) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(list(args))
    return status, out.getvalue()


def test_the_known_policies_are_found():
    assert {Path(p).stem for p in POLICIES} >= {"apollo", "tvm", "xla", "dnnfusion"}


@pytest.fixture(scope="module")
def attention(tmp_path_factory) -> str:
    return attention_model(tmp_path_factory.mktemp("attention") / "attention.onnx")


@pytest.mark.filterwarnings("error::RuntimeWarning")  # NumPy's log(0) warnings once leaked from test blocks
@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: Path(p).stem)
def test_the_policy_lints_clean(policy):
    assert cli("lint", policy) == (0, "1 file(s): 0 error(s), 0 warning(s)\n")


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: Path(p).stem)
def test_the_policy_checks(policy):
    # every kind, few instances: what breaks here is a rule the checker cannot take at all
    # (a nofuse entry stopped `check xla`), not a coverage verdict
    status, out = cli("check", policy, "--examples", "10", "--budget", "2")
    assert status == 0, out
    assert " 0 failed" in out.splitlines()[-1]


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: Path(p).stem)
def test_the_policy_runs_an_attention_model_checked(policy, attention):
    status, out = cli("run", attention, "--rules", policy, "--random-inputs", "0", "--check")
    assert status == 0, out
    assert "check against the reference interpreter: ok" in out
