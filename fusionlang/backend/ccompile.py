"""Compile generated C with the system compiler, cache the results, load them with ctypes.

Each translation unit (a chunk of kernels, :mod:`.chunks`) is compiled to its own object
file, cached on disk under a hash of its source, the flags, the compiler, the processor
and fusionlang's version, so the same kernels compile once; objects compile in parallel.
A graph's objects and its driver are then linked into one shared library, also cached.
Compiler: ``$CC`` or ``cc``.

The cache (:mod:`.kernel_cache`) is ``$FUSIONLANG_CACHE_DIR``, else
``$XDG_CACHE_HOME/fusionlang``, else ``~/.cache/fusionlang``, private to its user (mode
0700). An entry is loaded only when the check file beside it binds its bytes to the key
it was asked for, so a truncated entry, or a library copied from another key with its
own check file, is built again. A cache another user owns or others may write, or one
that cannot be written, is not used: kernels then compile in a private temporary
directory and one line on stderr says why. Builds enter the cache by atomic renames;
``$FUSIONLANG_CACHE_MAX_BYTES`` (default 2 GiB) bounds it, least recently used entries
going first. ``fusionlang cache info|clear`` shows and empties it.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

from fusionlang.backend.kernel_cache import cache_dir, cached_build, clear_cache, entry_key, entry_path, verified
from fusionlang.backend import thread_pool
from fusionlang.backend.omp_wait import passive_wait_while_loading
from fusionlang.errors import CodegenError

BASE_FLAGS = ["-std=gnu11", "-fPIC", "-fno-math-errno", "-fno-trapping-math", "-fopenmp-simd",
              "-Wno-unknown-pragmas"]


#: graphs with at most this many distinct kernels compile as one translation unit
SINGLE_UNIT = 4

#: how hard the C compiler works on a unit. Loop nests need -O3: its vectorizer takes loops
#: that -O2's cheap cost model leaves scalar. The GEMM template's hot loops are explicit
#: vector code and ``omp simd`` loops, which -O2 vectorizes too, while -O3 spent about half
#: of such a unit's compile time (fully unrolling the remainder loops of the epilogues).
#: Loop nests also ask for 512-bit vectors: gcc's tuning for AVX-512 Xeons vectorizes with
#: 256-bit ones, which left softmax 4096x1024 at 3.58 ms against 2.64 (the elementwise
#: chains 13 to 27% faster, erf GELU within the noise, the models within +-3%; measured A/B
#: in one process on a Sapphire Rapids core). Where the machine has no AVX-512 the
#: preference changes nothing.
#: ``$FUSIONLANG_COPT`` overrides both.
LOOP_OPT, TEMPLATE_OPT = "-O3 -mprefer-vector-width=512", "-O2"


def compiler() -> str:
    return os.environ.get("CC", "cc")


@lru_cache(maxsize=None)
def _compiler_id(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise CodegenError(f"C compiler {cc!r} cannot be run: {exc}") from None
    return out.splitlines()[0] if out else cc


@lru_cache(maxsize=None)
def _cpu_id() -> str:
    # -march=native code must not be reused on another processor
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return hashlib.sha256(line.encode()).hexdigest()[:12]
    except OSError:
        pass
    return os.uname().machine


@lru_cache(maxsize=None)
def native_features() -> frozenset[str] | None:
    """The instruction-set extensions ``-march=native`` lets the compiler use, as GCC
    names them without ``-m`` (``sse4.2``, ``avx512vnni``); None where the compiler
    cannot list them (GCC can: ``-Q --help=target``)."""
    try:
        out = subprocess.run([compiler(), "-march=native", "-Q", "--help=target"], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    found = {line.split()[0][2:] for line in out.stdout.splitlines()
             if line.strip().startswith("-m") and line.rstrip().endswith("[enabled]")}
    return frozenset(found) if out.returncode == 0 and found else None


#: libm functions generated code calls, and their argument counts
_VECTOR_MATH = {"expf": 1, "logf": 1, "erff": 1, "tanhf": 1, "sinf": 1, "cosf": 1, "powf": 2,
                "exp": 1, "log": 1, "erf": 1, "tanh": 1, "sin": 1, "cos": 1, "pow": 2}


@lru_cache(maxsize=None)
def vector_math() -> tuple[str, ...]:
    """libm functions with SIMD variants in glibc's libmvec (every x86-64 ISA level).

    Declaring them ``omp declare simd`` lets the compiler vectorize loops calling expf or
    erff (otherwise the scalar call dominates a fused elementwise loop); the variants are
    accurate to a few ulp. Empty when libmvec or a compiler accepting it is missing.
    """
    if os.uname().machine != "x86_64" or os.environ.get("FUSIONLANG_NO_MVEC"):
        return ()
    try:
        lib = ctypes.CDLL("libmvec.so.1")
    except OSError:
        return ()
    found = []
    for fn, nargs in _VECTOR_MATH.items():
        single = fn.endswith("f") and fn != "erf"
        lanes = {"b": 4, "c": 8, "d": 8, "e": 16} if single else {"b": 2, "c": 4, "d": 4, "e": 8}
        if all(hasattr(lib, f"_ZGV{isa}N{n}{'v' * nargs}_{fn}") for isa, n in lanes.items()):
            found.append(fn)
    if not found:
        return ()
    # the linker needs libmvec.so (libc's development files), not only the runtime's
    # libmvec.so.1; asking the compiler where it is costs 2 ms, a probe compile 40 ms
    return tuple(found) if _library_path("libmvec.so") else ()


def _library_path(library: str) -> str | None:
    """Where the compiler finds ``library``, or None (it answers the bare name then)."""
    try:
        out = subprocess.run([compiler(), f"-print-file-name={library}"], capture_output=True, text=True,
                             timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out if out and os.path.isabs(out) and os.path.exists(out) else None


def vector_math_declarations(functions=None) -> str:
    functions = vector_math() if functions is None else functions
    lines = []
    for fn in functions:
        t = "float" if fn.endswith("f") and fn != "erf" else "double"
        args = ", ".join([t] * _VECTOR_MATH[fn])
        lines.append(f"#pragma omp declare simd notinbranch\n{t} {fn}({args});")
    return "\n".join(lines) + ("\n" if lines else "")


def link_libraries() -> list[str]:
    return (["-lmvec"] if vector_math() else []) + ["-lm"]


def flags(*, openmp: bool = False, sanitize: bool = False, opt: str | None = None) -> list[str]:
    out = list(BASE_FLAGS)
    opt = os.environ.get("FUSIONLANG_COPT") or opt or LOOP_OPT
    if sanitize:
        out += ["-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer"]
    else:
        # no red zone: GCC 12 with AVX-512 misaligns vector stores to red-zone arrays
        out += [*shlex.split(opt), "-march=native", "-mno-red-zone"]
    if openmp:
        out.append("-fopenmp")
    return out


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        log = (proc.stderr or proc.stdout).strip().splitlines()
        raise CodegenError(f"C compiler failed on {what}: " + " | ".join(log[:12]))


def compile_object(source: str, flag_list: list[str]) -> Path:
    """Object file of one translation unit (cached)."""
    cc = compiler()
    key = entry_key(_compiler_id(cc), _cpu_id(), " ".join(flag_list), source)

    def build(out: Path, tmp: Path) -> None:
        src = out.with_suffix(".c")
        src.write_text(source)
        _run([cc, *flag_list, "-c", str(src), "-o", str(out)], f"kernel {out.stem}")

    return cached_build(entry_path(key, suffix=".o"), build, key)


def build_library(sources: list[str], *, openmp: bool = False, sanitize: bool = False,
                  jobs: int | None = None, opts: list[str] | None = None, pool: bool = True) -> Path:
    """Shared library of the given translation units: one object per unit, compiled in
    parallel and cached, then linked (a single unit is compiled and linked in one run).
    ``opts``: each unit's optimization level (default LOOP_OPT). With ``openmp`` a GCC
    build links fusionlang's thread pool (:mod:`.thread_pool`) in place of libgomp, unless
    ``pool=False`` (the kernels then share the process's libgomp: PyTorch's)."""
    opts = opts or [LOOP_OPT] * len(sources)
    cc = compiler()
    pooled = openmp and pool and thread_pool.carried_by(_compiler_id(cc))
    if pooled:
        sources, opts = [*sources, thread_pool.source()], [*opts, TEMPLATE_OPT]
    flag_list = flags(openmp=openmp, sanitize=sanitize)
    unit_flags = [flags(openmp=openmp, sanitize=sanitize, opt=opt) for opt in opts]
    if len(sources) == 1:
        return _single_unit(sources[0], unit_flags[0])
    jobs = jobs or max(1, os.cpu_count() or 1)
    if jobs > 1 and len(sources) > 1:
        with ThreadPoolExecutor(jobs) as executor:
            objects = list(executor.map(compile_object, sources, unit_flags))
    else:
        objects = [compile_object(s, f) for s, f in zip(sources, unit_flags)]
    # the pool defines every OpenMP entry point the kernels call: libgomp, which -fopenmp
    # names, is then left out (a kernel calling one the pool lacks would keep it, which
    # tests/backend/test_thread_pool.py catches)
    link_flags = [*flag_list, "-Wl,--as-needed"] if pooled else flag_list
    key = entry_key(_compiler_id(cc), " ".join(link_flags), *[o.name for o in objects])

    def build(out: Path, tmp: Path) -> None:
        link = [cc, "-shared", *link_flags, *[str(o) for o in objects], "-o", str(out), *link_libraries()]
        _run(link, "the kernel library")

    return cached_build(entry_path(key, "lib", ".so"), build, key)


def _single_unit(text: str, flag_list: list[str]) -> Path:
    # a few kernels: one compiler run for the whole library is cheaper than one per object
    cc = compiler()
    key = entry_key(_compiler_id(cc), _cpu_id(), " ".join(flag_list), "single", text)

    def build(out: Path, tmp: Path) -> None:
        src = tmp / "unit.c"
        src.write_text(text)
        _run([cc, "-shared", *flag_list, str(src), "-o", str(out), *link_libraries()], "the kernel library")

    return cached_build(entry_path(key, "lib", ".so"), build, key)


def load_library(path: Path, *, openmp: bool = False) -> ctypes.CDLL:
    """The library at ``path``; built with ``openmp`` and libgomp (not the pool), its idle
    threads sleep (:mod:`.omp_wait`)."""
    try:
        with passive_wait_while_loading(openmp and thread_pool.needs_libgomp(path.read_bytes())):
            return ctypes.CDLL(str(path))
    except OSError as exc:
        raise CodegenError(f"cannot load compiled kernels {path.name}: {exc}") from None


def asan_runtime() -> str | None:
    """Path of the compiler's AddressSanitizer runtime (to LD_PRELOAD), or None."""
    return _library_path("libasan.so")


__all__ = ["LOOP_OPT", "TEMPLATE_OPT", "asan_runtime", "build_library", "cache_dir", "cached_build", "clear_cache",
           "compile_object", "flags", "load_library", "native_features", "verified"]
