"""Compile CUDA source to PTX with NVRTC, which needs no GPU (only the NVRTC library).

The test suite compiles every generated kernel this way, so CUDA code is at least
checked by the real compiler on machines (and CI) without a device.
"""

from __future__ import annotations

from fusionlang.errors import CodegenError

DEFAULT_OPTIONS = ("-std=c++17",)


def nvrtc_available() -> str | None:
    """None if NVRTC can be used here, else why not."""
    try:
        from cupy_backends.cuda.libs import nvrtc  # here: CuPy is optional and slow to import

        nvrtc.getVersion()
    except Exception as exc:  # noqa: BLE001 - any failure to load means "unavailable"
        return f"{type(exc).__name__}: {exc}"
    return None


def nvrtc_compile(source: str, arch: str = "compute_90", name: str = "fusionlang.cu") -> str:
    """PTX of ``source``; raises CodegenError with NVRTC's log when it does not compile."""
    try:
        from cupy_backends.cuda.libs import nvrtc  # here: CuPy is optional and slow to import
    except Exception as exc:  # noqa: BLE001
        raise CodegenError(f"NVRTC is not available: {exc}") from None
    prog = nvrtc.createProgram(source, name, [], [])
    try:
        try:
            nvrtc.compileProgram(prog, [f"-arch={arch}", *DEFAULT_OPTIONS])
        except nvrtc.NVRTCError:
            log = nvrtc.getProgramLog(prog)
            raise CodegenError(f"NVRTC rejected the generated CUDA:\n{log}") from None
        ptx = nvrtc.getPTX(prog)
    finally:
        nvrtc.destroyProgram(prog)
    return ptx.decode() if isinstance(ptx, bytes) else ptx


__all__ = ["nvrtc_available", "nvrtc_compile"]
