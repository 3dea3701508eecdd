"""Write fusionlang/lang/fuse_tables.py: the .fuse parser's LALR tables for the current
fuse.lark (see fusionlang/lang/parse_tables.py), and fusionlang/lang/std_modules.py: the
standard rule files' syntax trees (see fusionlang/lang/shipped.py). Run it after every
change to the grammar, the parser, the tree's classes or a standard rule file;
tests/lang/test_parse_tables.py fails while either file is stale.

    python tools/gen_parse_tables.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fusionlang.lang.diagnostics import Diagnostics  # noqa: E402
from fusionlang.lang.loader import display_path, read_rule_file, rules_dir  # noqa: E402
from fusionlang.lang.parse_tables import TABLES, tables_module  # noqa: E402
from fusionlang.lang.parser import parse_module  # noqa: E402
from fusionlang.lang.shipped import STD_MODULES, std_modules_text  # noqa: E402


def standard_trees() -> dict:
    """display path -> (text, parsed tree) of every rule file in the package."""
    trees = {}
    for path in sorted(Path(rules_dir()).rglob("*.fuse")):
        text = read_rule_file(str(path))
        display = display_path(str(path))
        diags = Diagnostics()
        tree = parse_module(text, display, diags)
        if tree is None:
            raise SystemExit(f"{display} does not parse: {diags}")
        trees[display] = (text, tree)
    return trees


if __name__ == "__main__":
    for name, text in ((TABLES, tables_module()), (STD_MODULES, std_modules_text(standard_trees()))):
        out = ROOT / "fusionlang" / "lang" / name
        out.write_text(text, encoding="utf-8")
        print(f"wrote {out.relative_to(ROOT)}")
