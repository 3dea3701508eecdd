"""Write fusionlang/lang/fuse_tables.py: the .fuse parser's LALR tables for the current
fuse.lark (see fusionlang/lang/parse_tables.py). Run it after every grammar change;
tests/lang/test_parse_tables.py fails while the file is stale.

    python tools/gen_parse_tables.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fusionlang.lang.parse_tables import TABLES, tables_module  # noqa: E402

if __name__ == "__main__":
    out = ROOT / "fusionlang" / "lang" / TABLES
    out.write_text(tables_module(), encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")
