"""Defects in other packages that the property checks found, each with a minimal repro
(the strict-xfail tests in test_equivalence.py and test_standard_rules.py name them).

The batch equivalence tests tolerate a *crash* matching one of these signatures (never a
wrong value), so a known defect does not hide a new one; when a defect is fixed its
strict-xfail test starts passing and fails the suite, and its entry here goes away.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Defect:
    name: str
    #: stages (of fusionlang.testing.equivalence.STAGES) the defect shows in; never "compare"
    stages: tuple[str, ...]
    pattern: str
    summary: str

    def matches(self, verdict) -> bool:
        return verdict.stage in self.stages and re.search(self.pattern, verdict.error or "") is not None


PIPELINE = (
)

#: (kind, name, where) of standard rules the rule checker finds wrong
RULES: dict[tuple[str, str, str], str] = {}


def known_crash(verdict) -> Defect | None:
    return next((d for d in PIPELINE if d.matches(verdict)), None)
