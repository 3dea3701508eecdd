"""What a user sees of the package itself: a cheap `import fusionlang` and `fusionlang
--help` (the heavy libraries load where they are used), one version from the package
metadata, and the files an install ships (LICENSE, py.typed)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import fusionlang
from fusionlang.cli import main

ROOT = Path(__file__).resolve().parents[1]
#: libraries that cost most of a second each to import (ml_dtypes' extension alone 0.8 s)
HEAVY = ("ml_dtypes", "sympy", "islpy", "lark", "onnx", "networkx", "hypothesis", "torch")


def loaded_after(code: str) -> list[str]:
    """The HEAVY modules a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def test_import_fusionlang_loads_no_heavy_library():
    assert loaded_after("import fusionlang") == []


def test_help_loads_no_heavy_library():
    code = "from fusionlang.cli import main\nimport contextlib, io\n" \
           "with contextlib.redirect_stdout(io.StringIO()): assert main(['--help']) == 0"
    assert loaded_after(code) == []


def test_public_names_resolve_on_first_use():
    assert loaded_after("import fusionlang\nfusionlang.fuse") != []  # the facade does load them when asked
    for name in fusionlang.__all__:
        assert getattr(fusionlang, name) is not None
    assert "fuse" in dir(fusionlang)


def test_the_torch_front_door_imports_torch_only_on_use():
    # torch is an optional extra, and its import costs seconds
    code = "import fusionlang\nimport fusionlang.torch_backend\nfusionlang.from_torch"
    assert "torch" not in loaded_after(code)


def test_an_unknown_attribute_is_an_attribute_error():
    try:
        fusionlang.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("fusionlang.no_such_name resolved")


def test_one_version_from_the_package_metadata(capsys):
    assert fusionlang.__version__ == metadata.version("fusionlang")
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"fusionlang {metadata.version('fusionlang')}"


def test_the_install_ships_a_license_and_type_information():
    assert (Path(fusionlang.__file__).parent / "py.typed").is_file()
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    assert '"py.typed"' in (ROOT / "pyproject.toml").read_text()  # package data: a wheel carries it too
