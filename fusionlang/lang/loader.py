"""Finding and loading rule files: names of the standard library, imports, caching.

``load_rules("apollo")`` reads ``fusionlang/rules/apollo.fuse`` from the installed
package; ``load_rules("my.fuse")`` reads a file. An ``import "x.fuse"`` resolves
relative to the importing file (for a file in a ``std/`` folder, then to the rules tree
holding that folder), then in the package's rules directory, then in its ``std/`` folder. Each file is loaded once per rule set, imports before the importing
file, so their rules come first. Parsed files and checked rule sets are cached by path
and modification time (both are immutable, so sharing them is safe).
"""

from __future__ import annotations

import os
import stat
from importlib import resources

from fusionlang.errors import RuleError
from fusionlang.lang import ast as A
from fusionlang.lang.checker import check_modules, clear_memo
from fusionlang.lang.diagnostics import Diagnostic, Diagnostics, Span, remember_source
from fusionlang.lang.parser import parse_module
from fusionlang.lang.shipped import shipped_module
from fusionlang.lang.ruleset import RuleSet
from fusionlang.ops.registry import REGISTRY, OpRegistry

#: a rule file larger than this is refused unread (also stops endless /proc-like files)
MAX_RULE_FILE_BYTES = 16 * 1024 * 1024

_MODULES: dict[tuple, A.Module] = {}
_RULESETS: dict[tuple, RuleSet] = {}


def rules_dir() -> str:
    """The directory of the standard rule files inside the installed package."""
    return str(resources.files("fusionlang").joinpath("rules"))  # a Path: the package is installed as files


def standard_names() -> list[str]:
    """Names ``load_rules`` accepts for the standard library ("apollo", "std/ops", ...)."""
    root = rules_dir()
    names = []
    for folder, _, files in os.walk(root):
        for f in files:
            if f.endswith(".fuse"):
                rel = os.path.relpath(os.path.join(folder, f), root)
                names.append(rel[: -len(".fuse")].replace(os.sep, "/"))
    return sorted(names)


def clear_caches() -> None:
    """Forget parsed files, checked rule sets and memoized checks."""

    _MODULES.clear()
    _RULESETS.clear()
    clear_memo()


def display_path(real: str) -> str:
    """How a file is named in diagnostics: relative to the rules dir for the standard
    library ("std/ops.fuse"), else relative to the working directory when inside it."""
    real = os.path.realpath(real)
    if is_standard(real):
        return os.path.relpath(real, os.path.realpath(rules_dir())).replace(os.sep, "/")
    rel = os.path.relpath(real)
    return rel if not rel.startswith("..") else real


def is_standard(real: str) -> bool:
    """Is the file at real path ``real`` one of the standard library's (under rules_dir)?"""
    return real.startswith(os.path.realpath(rules_dir()) + os.sep)


def resolve(name_or_path: str) -> str | None:
    """The real path a rule-set name or file path refers to, or None."""
    if os.path.isfile(name_or_path):
        return os.path.realpath(name_or_path)
    root = rules_dir()
    for candidate in (name_or_path, f"{name_or_path}.fuse"):
        path = os.path.join(root, candidate)
        if os.path.isfile(path):
            return os.path.realpath(path)
    return None


def _resolve_import(target: str, importer_dir: str | None) -> str | None:
    """The first existing path ``target`` names (of any kind: reading decides whether
    it is a readable rule file, and says why not)."""
    bases = ([importer_dir] if importer_dir else [os.getcwd()]) + _own_rules_root(importer_dir) + \
            [rules_dir(), os.path.join(rules_dir(), "std")]
    for base in bases:
        path = os.path.join(base, target)
        if os.path.lexists(path):
            return os.path.realpath(path)
    return None


def _own_rules_root(importer_dir: str | None) -> list[str]:
    """For a file in a ``std/`` folder, the rules tree holding that folder. Its imports
    (``import "std/ops.fuse"``) name files of that tree: a checkout's std file must not
    reach the installed package's copy, or a rule set holds both and every def in them is
    "already defined"."""
    if importer_dir and os.path.basename(importer_dir) == "std":
        return [os.path.dirname(importer_dir)]
    return []


def _file_key(real: str) -> tuple:
    st = os.stat(real)
    return (real, st.st_mtime_ns, st.st_size)


class UnreadableRuleFile(Exception):
    """A rule file cannot be read; the message never quotes its content."""


def read_rule_file(real: str) -> str:
    """The text of the rule file ``real``. Only regular files named ``*.fuse`` are opened
    (a FIFO or a device could block or never end; any other file is not read, so a
    diagnostic never quotes a line of, say, /etc/shadow), at most MAX_RULE_FILE_BYTES are
    read, and the text must be UTF-8 (a leading byte-order mark is dropped); anything else
    raises UnreadableRuleFile."""
    try:
        mode = os.stat(real).st_mode
        if stat.S_ISDIR(mode):
            raise UnreadableRuleFile("it is a directory")
        if not stat.S_ISREG(mode):
            raise UnreadableRuleFile("it is not a regular file")
        if not real.endswith(".fuse"):
            raise UnreadableRuleFile("it is not a .fuse file (rule files are named NAME.fuse)")
        with open(real, "rb") as fh:
            data = fh.read(MAX_RULE_FILE_BYTES + 1)
    except OSError as exc:
        raise UnreadableRuleFile(exc.strerror or type(exc).__name__) from None
    if len(data) > MAX_RULE_FILE_BYTES:
        raise UnreadableRuleFile(f"it is larger than {MAX_RULE_FILE_BYTES // (1024 * 1024)} MiB")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableRuleFile(f"it is not UTF-8 text (byte {exc.start})") from None


def _parse_file(real: str, diags: Diagnostics, span: Span) -> A.Module | None:
    """The parsed module of ``real``, or None with diagnostics (a file that cannot be
    read is reported at ``span``: the import naming it, or the file itself)."""
    try:
        key = _file_key(real)
        cached = _MODULES.get(key)
        if cached is not None:
            return cached
        text = read_rule_file(real)
    except (OSError, UnreadableRuleFile) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        diags.error(span, f"cannot read {display_path(real)!r}: {reason}")
        return None
    display = display_path(real)
    # a standard file as shipped parsed: no lark run; only a standard file looks, since the
    # shipped trees' module takes 0.4 s to import when Python has no bytecode cache for it
    module = shipped_module(display, text) if is_standard(real) else None
    if module is not None:
        remember_source(display, text)
    else:
        module = parse_module(text, display, diags)
    if module is not None:
        _MODULES[key] = module
    return module


class _Collector:
    """Loads a root module and its imports depth-first (imports before importers)."""

    def __init__(self, diags: Diagnostics):
        self.diags = diags
        self.modules: list[A.Module] = []
        self.keys: list[tuple] = []
        self.done: set[str] = set()
        self.stack: list[str] = []
        #: ``import "x.fuse" for lowering`` items met in any module, with the real path each names
        self.lowering: list[tuple[A.Import, str]] = []
        #: the real path of the first module added (the rule set's own file), if it has one
        self.root: str | None = None

    def add_module(self, module: A.Module, real: str | None) -> None:
        if real is not None:
            if self.root is None and not self.stack:
                self.root = real
            self.stack.append(real)
        importer_dir = os.path.dirname(real) if real else None
        for item in module.items:
            if isinstance(item, A.Import):
                self.add_import(item, importer_dir)
        if real is not None:
            self.stack.pop()
            self.done.add(real)
            self.keys.append(_file_key(real))
        self.modules.append(module)

    def add_import(self, item: A.Import, importer_dir: str | None) -> None:
        real = self._import_target(item, importer_dir)
        if real is None:
            return
        if item.lowering or item.without:
            # the ops an import keeps whole are opened, inside their groups, by its own cases
            self.lowering.append((item, real))
        if item.lowering:
            return
        if real in self.stack:
            chain = [display_path(p) for p in self.stack[self.stack.index(real):]] + [display_path(real)]
            self.diags.error(item.span, f"import cycle: {' -> '.join(chain)}")
            return
        if real in self.done:
            return
        module = _parse_file(real, self.diags, item.span)
        if module is None:
            self.done.add(real)
            return
        self.add_module(module, real)

    def _import_target(self, item: A.Import, importer_dir: str | None) -> str | None:
        """The real path ``item`` names, or None with the error reported."""
        if not item.path.endswith(".fuse"):
            # refused before any look-up: an import must never read other files
            self.diags.error(item.span, f"import {item.path!r} does not name a .fuse file",
                             "imports name rule files, e.g. import \"std/ops.fuse\"")
            return None
        real = _resolve_import(item.path, importer_dir)
        if real is None:
            where = [importer_dir or os.getcwd(), display_path(rules_dir()), "std/"]
            self.diags.error(item.span, f"cannot find import {item.path!r}",
                             f"imports resolve relative to the importing file, then in the standard rules "
                             f"directory ({rules_dir()}) and its std/ folder; looked in {where[0]}")
            return None
        return real


#: real paths of the rule files loading a lowering import now, outermost first (a cycle of
#: lowering imports is an error, not an endless recursion)
_LOWERING_STACK: list[str] = []


def _check(collector: _Collector, name: str, registry: OpRegistry | None,
           lowering: tuple[RuleSet, ...] | None = None) -> RuleSet | None:
    if lowering is None:
        lowering = _lowering_rulesets(collector, registry)
    if collector.diags.errors:
        return None
    return check_modules(collector.modules, name=name, registry=registry or REGISTRY, diags=collector.diags,
                         imports=tuple(m.path for m in collector.modules[:-1]), lowering=lowering)


def _lowering_rulesets(collector: _Collector, registry: OpRegistry | None) -> tuple[RuleSet, ...]:
    """The rule set of each ``import ... for lowering`` (each loaded on its own, once);
    their errors join the importer's diagnostics, located in their own files."""
    found: dict[str, RuleSet] = {}
    importers = _LOWERING_STACK + ([collector.root] if collector.root else [])
    for item, real in collector.lowering:
        if real in found:
            continue
        if real in importers:
            chain = [display_path(p) for p in importers[importers.index(real):]] + [display_path(real)]
            collector.diags.error(item.span, f"import cycle through lowering imports: {' -> '.join(chain)}")
            continue
        _LOWERING_STACK.append(collector.root or "")
        try:
            found[real] = load_rules(real, registry)
        except RuleError as exc:
            collector.diags.items.extend(exc.diagnostics)
        finally:
            _LOWERING_STACK.pop()
    return tuple(found.values())


def load_rules(name_or_path, registry: OpRegistry | None = None) -> RuleSet:
    """The checked rule set of a standard name ("apollo", "tvm", "dnnfusion", "decompose",
    "simplify", "std/ops") or a .fuse file; raises RuleError with every diagnostic."""
    if isinstance(name_or_path, RuleSet):
        return name_or_path
    name_or_path = os.fspath(name_or_path)
    real = resolve(name_or_path)
    if real is None:
        known = ", ".join(standard_names())
        diag = Diagnostic(Span(str(name_or_path), 1, 1), "error", f"no rule file or rule set named {name_or_path!r}",
                          f"standard rule sets: {known}")
        raise RuleError([diag])
    base = registry or REGISTRY
    diags = Diagnostics()
    collector = _Collector(diags)
    module = _parse_file(real, diags, Span(display_path(real), 1, 1))
    if module is not None:
        collector.add_module(module, real)
    lowering = _lowering_rulesets(collector, registry)
    # a lowering rule set is itself cached by its files: the same object while they are unchanged
    cache_key = (tuple(collector.keys), id(base), base.registered(), tuple(id(r) for r in lowering))
    if not diags.errors and cache_key in _RULESETS:
        return _RULESETS[cache_key]
    ruleset = _check(collector, os.path.basename(real)[: -len(".fuse")] if real.endswith(".fuse")
                     else os.path.basename(real), registry, lowering)
    if ruleset is None:
        raise RuleError(diags.sorted())
    _RULESETS[cache_key] = ruleset
    return ruleset


def parse_text(text: str, path: str = "<string>", registry: OpRegistry | None = None) -> RuleSet:
    """The checked rule set of ``text``; imports resolve relative to ``path``'s folder (or
    the working directory), then in the standard library."""
    diags = Diagnostics()
    module = parse_module(text, path, diags)
    collector = _Collector(diags)
    if module is not None:
        real = os.path.realpath(path) if os.path.isfile(path) else None
        importer_dir = os.path.dirname(real) if real else None
        # the text is the rule set's own file, not the first file it imports
        collector.root = real or path
        for item in module.items:
            if isinstance(item, A.Import):
                collector.add_import(item, importer_dir)
        collector.modules.append(module)
    ruleset = _check(collector, os.path.basename(path).rsplit(".", 1)[0] or path, registry)
    if ruleset is None:
        raise RuleError(diags.sorted())
    return ruleset


def lint(paths, registry: OpRegistry | None = None) -> list[Diagnostic]:
    """Every diagnostic (errors and warnings) of each file in ``paths``; never raises for
    bad input."""
    out: list[Diagnostic] = []
    for path in paths:
        path = os.fspath(path)
        diags = Diagnostics()
        real = resolve(path)
        if real is None:
            diags.error(Span(path, 1, 1), f"cannot read {path!r}: no such file", "")
            out.extend(diags.sorted())
            continue
        module = _parse_file(real, diags, Span(path, 1, 1))
        collector = _Collector(diags)
        if module is not None:
            collector.add_module(module, real)
            _check(collector, os.path.basename(real), registry)
        out.extend(diags.sorted())
    return out
