"""float16 and bfloat16 matmul, gemm and conv on the CPU GEMM template (:mod:`.gemm_template`).

The template's kernels compute in float32: packed panels, float32 FMAs, a float32 epilogue.
A 16-bit group runs them unchanged on float32 copies of its operands:

* a constant operand (weights) is packed at compile time, widened to float32 then (exact:
  every 16-bit float is a float32), so it costs nothing at run time;
* an operand read at run time (activations, a conv's input image) is widened into a
  float32 buffer of the same layout before the call (one pass over it: O(m k) or one
  image, against the GEMM's O(m n k));
* the GEMM accumulates in a float32 buffer of the output's layout; its epilogue computes
  in float32 and rounds each statement's value to its dtype as the loop nest does
  (:mod:`.epilogue`), so the accumulated value it leaves is already a 16-bit value and
  the final pass stores it exactly.

Numerics are the reference's (:func:`fusionlang.ops.evaluate.evaluate_node`: inputs
widened to float32, products summed in float32, the result rounded once to nearest even);
only the order of the float32 sums differs, so a result may differ from the reference's by
the float32 rounding of a K-long sum (about ``K * 2**-24`` of the sum of ``|a b|``) before
the final rounding to 16 bits, which then may land one 16-bit unit apart.

Depthwise convolutions and pools (the depthwise template) run the same way: their input
widened, their float32 kernel, their output stored in 16 bits.
"""

from __future__ import annotations

from math import prod

from fusionlang.backend.failures import ALLOC
from fusionlang.backend.half import narrow, widen
from fusionlang.backend.poly import Array
from fusionlang.ir.types import HALF_FLOATS

#: the dtypes of A, B and C the C template takes: float32, and 16-bit floats widened to it
C_ELEMENT_DTYPES = ("float32",) + HALF_FLOATS


def _store_loop(param: str, array: Array) -> list[str]:
    """C lines storing the float32 buffer ``<param>_f`` into ``param``, the 16-bit ``array``.
    Each value is exactly a 16-bit value (the epilogue rounded it), so a bfloat16 is its
    top half (a shift that vectorizes, where rounding's NaN test kept GCC from it) and a
    float16 converts exactly in one instruction where the CPU has AVX-512 FP16 (GCC left
    the integer rounding scalar: 2.5x the time of the 16-bit GEMM it followed)."""
    loop = f"    for (long i = 0; i < {_elements(array)}; i++) "
    if array.dtype == "bfloat16":
        return [loop + f"{param}[i] = (unsigned short)(fl_f_bits({param}_f[i]) >> 16);"]
    return ["#ifdef __AVX512FP16__",
            "    typedef _Float16 fl_f16_alias __attribute__((may_alias));",
            loop + f"((fl_f16_alias *){param})[i] = (_Float16){param}_f[i];",
            "#else",
            loop + f"{param}[i] = {narrow(array.dtype, f'{param}_f[i]')};",
            "#endif"]


def _elements(array: Array) -> int:
    return int(prod(array.shape))


def widening_wrapper(name: str, decls: list[str], kernel: str, args: list[str], operands: list[Array],
                     result: Array, alloc: tuple[int, int] | None) -> str:
    """``void name(<decls>, int64_t *fl_err)``: widens each 16-bit array of ``operands``
    (passed as the first ``args``: A and B, or a pool's input) into a float32 buffer of its
    layout, calls ``kernel`` on those buffers and a float32 one for ``result`` (the next
    of ``args``; the rest, the epilogue's, as they are), then stores the accumulated values
    into ``result`` in its dtype (a float32 ``result`` the kernel writes itself).
    ``alloc``: (the error code, the bytes the kernel allocates), None for a kernel that
    allocates nothing (and returns nothing). A buffer that cannot be allocated, or a
    kernel that cannot allocate its own, fills the error record with the code and the
    bytes asked for; nothing is stored then."""
    code, kernel_bytes = alloc or (ALLOC, 0)
    c_arg = args[len(operands)]
    widened = {param: array for param, array in zip(args, operands) if array.dtype in HALF_FLOATS}
    if result.dtype in HALF_FLOATS:  # else (a cast to float32 in the epilogue) the kernel writes it
        widened[c_arg] = result
    lines = [f"void {name}({', '.join(decls + ['int64_t *restrict fl_err'])}) {{"]
    # every buffer declared first, so that a failed allocation frees them all
    lines += [f"    float *restrict {param}_f = NULL;" for param in widened]
    for param, array in widened.items():  # one operand read as both A and B (x @ x): widened once
        nbytes = 4 * max(1, _elements(array))
        lines.append(f"    {param}_f = (float *)fl_alloc({nbytes});")
        lines.append(f"    if (!{param}_f) {{ fl_err[0] = {code}; fl_err[2] = {nbytes}; goto done; }}")
        if array is not result:
            lines.append(f"    for (long i = 0; i < {_elements(array)}; i++) "
                         f"{param}_f[i] = {widen(array.dtype, f'{param}[i]')};")
    leading = len(operands) + 1  # the epilogue's arguments keep their 16-bit arrays
    call = f"{kernel}({', '.join([f'{a}_f' if a in widened else a for a in args[:leading]] + args[leading:])})"
    lines.append(f"    if ({call}) {{ fl_err[0] = {code}; fl_err[2] = {kernel_bytes}; goto done; }}" if alloc
                 else f"    {call};")
    if result.dtype in HALF_FLOATS:
        lines += _store_loop(c_arg, result)
    lines.append("done:")
    lines += [f"    free({param}_f);" for param in widened]
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = ["C_ELEMENT_DTYPES", "widening_wrapper"]
