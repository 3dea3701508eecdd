"""The host CPU as the compute templates see it: vector width, register count, caches.

Generated C is compiled with ``-march=native`` (see :mod:`.ccompile`), so the templates
size their register blocking for the instruction set of the machine that compiles them:
AVX-512 (16 floats a vector, 32 vector registers), AVX2 (8 floats, 16 registers), NEON
(4 floats, 32 registers), or a portable fallback (4 floats, 16 registers) that GCC's
vector extensions lower to whatever the target has. Cache sizes come from the C library
(``sysconf``), then sysfs, then common defaults; they set the GEMM's cache blocking.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


@dataclass(frozen=True)
class Machine:
    isa: str  # "avx512" | "avx2" | "neon" | "generic"
    vector_floats: int
    vector_registers: int
    #: bytes, per core (L3: the whole shared cache)
    l1d: int
    l2: int
    l3: int


_ISAS = {"avx512": (16, 32), "avx2": (8, 16), "neon": (4, 32), "generic": (4, 16)}
_DEFAULT_CACHES = (32 * 1024, 1024 * 1024, 8 * 1024 * 1024)


def machine_for(isa: str, l1d: int = _DEFAULT_CACHES[0], l2: int = _DEFAULT_CACHES[1],
                l3: int = _DEFAULT_CACHES[2]) -> Machine:
    floats, registers = _ISAS[isa]
    return Machine(isa, floats, registers, l1d, l2, l3)


@lru_cache(maxsize=1)
def host() -> Machine:
    """The machine this process runs on (and compiles for). ``FUSIONLANG_ISA`` overrides
    the detected instruction set (``avx2`` on an AVX-512 machine, say), for tests."""
    isa = os.environ.get("FUSIONLANG_ISA") or _detect_isa()
    if isa not in _ISAS:
        isa = "generic"
    return machine_for(isa, *_cache_sizes())


def _detect_isa() -> str:
    arch = platform.machine().lower()
    if arch in ("aarch64", "arm64"):
        return "neon"
    if arch not in ("x86_64", "amd64"):
        return "generic"
    flags = cpu_features()
    if {"avx512f", "avx512vl"} <= flags:
        return "avx512"
    if {"avx2", "fma"} <= flags:
        return "avx2"
    return "generic"


@lru_cache(maxsize=1)
def cpu_features() -> frozenset[str]:
    """The instruction-set features of this processor as the kernel lists them (x86's
    ``flags``, ARM's ``Features`` line of /proc/cpuinfo); empty where it cannot tell.
    ``-march=native`` code may use any of them, so a saved library records them all."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def _cache_sizes() -> tuple[int, int, int]:
    found = []
    for level, name in ((1, "SC_LEVEL1_DCACHE_SIZE"), (2, "SC_LEVEL2_CACHE_SIZE"), (3, "SC_LEVEL3_CACHE_SIZE")):
        size = _sysconf(name) or _sysfs_cache(level)
        found.append(size or _DEFAULT_CACHES[level - 1])
    return found[0], found[1], found[2]


def _sysconf(name: str) -> int:
    try:
        value = os.sysconf(name)
    except (ValueError, OSError):
        return 0
    return value if value and value > 0 else 0


def _sysfs_cache(level: int) -> int:
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for index in sorted(root.glob("index*")):
            if int((index / "level").read_text()) != level:
                continue
            if (index / "type").read_text().strip() == "Instruction":
                continue
            return _parse_size((index / "size").read_text().strip())
    except (OSError, ValueError):
        pass
    return 0


def _parse_size(text: str) -> int:
    units = {"K": 1024, "M": 1024 * 1024, "G": 1024 ** 3}
    if text and text[-1].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)


__all__ = ["Machine", "cpu_features", "host", "machine_for"]
