"""`fusionlang cache info|clear`: the compiled-kernel cache, shown or emptied.

``info`` prints where the cache is, its entries and bytes, its size limit, and whether
it is used or refused and why (:mod:`fusionlang.backend.kernel_cache`). ``clear``
removes its entries and says what that freed; a cache this user does not own alone is
left untouched (exit 2).
"""

from __future__ import annotations

from fusionlang.backend.kernel_cache import LIMIT_VARIABLE, cache_report, clear_cache, entries_dir
from fusionlang.cli.modes import EXIT_OK, is_quiet, print_json, wants_json
from fusionlang.ir.memory import human_bytes


def configure(p) -> None:
    p.add_argument("action", choices=["info", "clear"], help="info: where it is and what it holds; clear: empty it")


def run(args) -> int:
    return {"info": _info, "clear": _clear}[args.action](args)


def _info(args) -> int:
    report = cache_report()
    if wants_json(args):
        print_json({"path": report.path, "entries": report.entries, "bytes": report.bytes, "limit": report.limit,
                    "in_use": report.in_use, "problem": report.problem})
    elif not is_quiet(args):
        status = "in use" if report.in_use else f"not used: {report.problem}"
        print(f"kernel cache: {report.path}")
        print(f"entries: {report.entries} ({human_bytes(report.bytes)})")
        print(f"limit: {human_bytes(report.limit)} ({LIMIT_VARIABLE})")
        print(f"status: {status}")
    return EXIT_OK


def _clear(args) -> int:
    removed, freed = clear_cache()
    path = str(entries_dir())
    if wants_json(args):
        print_json({"path": path, "removed": removed, "freed_bytes": freed})
    elif not is_quiet(args):
        print(f"removed {removed} entries from {path}, freed {human_bytes(freed)}")
    return EXIT_OK
