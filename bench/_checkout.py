"""Imported first by the benchmarks, so they measure the fusionlang of this checkout.

``python bench/NAME.py`` puts bench/ on sys.path, not the checkout: after a plain
(non-editable) ``pip install .`` the installed copy would be imported, and a benchmark
run after editing the code would time the code as it was at install time.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if (ROOT / "fusionlang" / "__init__.py").exists() and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
