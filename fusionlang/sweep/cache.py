"""Build results kept between sweeps, so a rerun resumes where the last one stopped.

A result is keyed by what decides it: the model's bytes, the text of every rule file
the policy loads (imports and lowering rule sets included), the strategy and options,
and fusionlang's version. Results are JSON, never pickles (a pickle from a shared place
runs code), in ``sweep/`` beside the kernel cache and under the same trust rule: a
directory another user owns, or group or others can write, is not used (the sweep then
runs without a cache and says why).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from fusionlang.backend.kernel_cache import cache_problem, cache_root
from fusionlang.version import VERSION


def sweep_cache_dir() -> Path:
    return cache_root() / "sweep"


def rules_digest(rules: str) -> str:
    """SHA-256 over the rule set's files (path and text), its lowering rule sets' too."""
    from fusionlang.lang import load_rules, rules_dir

    digest = hashlib.sha256()
    pending, seen = [load_rules(rules)], set()
    while pending:
        ruleset = pending.pop()
        for name in ruleset.files:
            path = name if os.path.isfile(name) else os.path.join(rules_dir(), name)
            if path not in seen:
                seen.add(path)
                digest.update(name.encode() + b"\0" + Path(path).read_bytes() + b"\0")
        pending.extend(ruleset.lowering)
    return digest.hexdigest()


def file_digest(path: str) -> str:
    """SHA-256 of the file's bytes; of the error text when it cannot be read (its build
    fails, and the failure is keyed like any result)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as exc:
        return "unreadable:" + type(exc).__name__


def build_key(model_digest: str, rules: str, strategy: str | None, options) -> str:
    parts = {"model": model_digest, "rules": rules, "strategy": strategy,
             "options": [[k, repr(v)] for k, v in options], "version": VERSION}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class ResultCache:
    """Build results by key, as JSON files; ``problem`` says why it is not used (or None)."""

    def __init__(self, enabled: bool = True):
        self.directory = sweep_cache_dir()
        self.problem = cache_problem(self.directory) if enabled else "disabled (--no-cache)"

    def get(self, key: str) -> dict | None:
        if self.problem:
            return None
        try:
            stored = json.loads((self.directory / f"{key}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        # the key inside too: a file renamed onto another key is not that key's result
        return stored.get("result") if isinstance(stored, dict) and stored.get("key") == key else None

    def put(self, key: str, result: dict) -> None:
        if self.problem:
            return
        text = json.dumps({"key": key, "result": result})
        try:  # written whole, then renamed: a reader never sees half a file
            fd, scratch = tempfile.mkstemp(dir=self.directory, prefix="tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(scratch, self.directory / f"{key}.json")
        except OSError:
            pass  # a full disk costs the next run a rebuild, not this run its result
