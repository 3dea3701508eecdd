"""float16 and bfloat16 in generated code: stored as 16-bit patterns, computed in float32.

C has no portable 16-bit float type (``_Float16`` is a GCC extension on some targets, CUDA's
``__half`` needs cuda_fp16.h on NVRTC's include path), so a 16-bit tensor is an array of
``unsigned short`` bit patterns. A load widens its element to float32 (exact), the statement
computes in float32, and a store rounds the result once to 16 bits, to nearest even, as
ONNX Runtime and the reference interpreter do (:func:`fusionlang.ops.evaluate.evaluate_node`).

The conversions are integer-only, so they do not depend on the floating-point environment
(rounding mode, flush-to-zero) and are the same text for C and CUDA:

- ``fl_h2f``: float16 -> float32, exact for every pattern (subnormals, infinities, NaN
  payloads kept, so every float16 pattern survives a round trip).
- ``fl_f2h``: float32 -> float16, round to nearest even; past 65520 (the tie above the
  largest float16, 65504) infinity; below 2**-14 a subnormal (or a signed zero); NaN stays
  NaN with its sign and its payload's top bits (the quiet bit set if none would remain).
- ``fl_bf2f`` / ``fl_f2bf``: bfloat16 is float32's top half, so widening is a shift and
  narrowing rounds the low 16 bits away to nearest even (overflow to infinity and
  subnormals come out of the same carry); NaN as for float16.
- ``fl_bf_round``: float32 rounded to bfloat16 and widened back in one function (an
  epilogue's rounding): the round trip's bits, except that a NaN comes out quiet (its sign
  and its payload's top bits kept).
- ``fl_d2f_odd``: a double rounded to float32 *to odd* (truncated, the last bit set when
  inexact). A float64 cast to float16 through a plain float32 would round twice (a double
  just above a float16 tie lands on the tie, then goes to even); rounded to odd first,
  float32's 13 spare bits keep the tie broken, so ``fl_f2h`` rounds once, correctly, as
  NumPy does. bfloat16 from float64 goes through a plain float32, as ml_dtypes (the
  reference) and ONNX Runtime do.
"""

from __future__ import annotations

from fusionlang.ir.types import HALF_FLOATS

#: the functions converting each 16-bit dtype: (to float32, from float32)
CONVERSIONS = {"float16": ("fl_h2f", "fl_f2h"), "bfloat16": ("fl_bf2f", "fl_f2bf")}

_SOURCE = """{q} float fl_bits_f(unsigned int u) {{ union {{ unsigned int u; float f; }} v; v.u = u; return v.f; }}
{q} unsigned int fl_f_bits(float f) {{ union {{ float f; unsigned int u; }} v; v.f = f; return v.u; }}
{q} float fl_bf_round(float f) {{
  /* fl_bf2f(fl_f2bf(f)) without leaving 32-bit lanes: narrowed to 16 bits and widened
     back, GCC's vector code packed and unpacked every vector (an epilogue's every step).
     A NaN is quieted (as AVX-512 BF16's and F16C's conversions do): found by f != f and
     one OR, seven vector operations in all against twelve keeping a signalling payload */
  unsigned int u = fl_f_bits(f);
  unsigned int r = f != f ? u | 0x400000u : u + 0x7fffu + ((u >> 16) & 1u);
  return fl_bits_f(r & 0xffff0000u);
}}
{q} float fl_h2f(unsigned short h) {{
  /* selects by masks, with the float multiply done either way: GCC leaves a loop with a
     conditional float operation (which could trap) or these selects unvectorized */
  unsigned int sign = (unsigned int)(h & 0x8000u) << 16, em = h & 0x7fffu;
  unsigned int special = 0u - (unsigned int)(em >= 0x7c00u), small = 0u - (unsigned int)(em < 0x400u);
  /* rebias the exponent by 112; infinity and NaN (exponent 31) by 224, to 255 */
  unsigned int bits = (em << 13) + 0x38000000u + (special & 0x38000000u);
  /* zero or subnormal: em * 2^-24, exact in float32 */
  unsigned int subnormal = fl_f_bits((float)(int)em * 5.9604644775390625e-08f);
  return fl_bits_f(sign | (bits & ~small) | (subnormal & small));
}}
{q} unsigned short fl_f2h(float f) {{
  unsigned int u = fl_f_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  unsigned int r = a - 0x38000000u, normal = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
  /* a subnormal float16: the 24-bit significand shifted right by 126 - e, to nearest even
     (the shift kept in [1, 31] where the result is not used, so it is always defined) */
  unsigned int e = a >> 23, shift = 126u - (e < 125u ? e : 125u);
  shift = shift < 31u ? shift : 31u;
  unsigned int m = (a & 0x7fffffu) | 0x800000u, q = m >> shift;
  unsigned int rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  unsigned int sub = e < 102u ? 0u : q + ((rest > half) | ((rest == half) & q));
  unsigned int payload = (a >> 13) & 0x3ffu, nan = 0x7c00u | (payload ? payload : 0x200u);
  /* branch-free selects, so that loops converting arrays vectorize */
  unsigned int out = a >= 0x38800000u ? normal : sub;
  out = a >= 0x477ff000u ? 0x7c00u : out;
  out = a > 0x7f800000u ? nan : out;
  return (unsigned short)(sign | out);
}}
{q} float fl_d2f_odd(double d) {{
  float f = (float)d;
  if (d != d || (double)f == d) return f;
  unsigned int u = fl_f_bits(f);
  if (fabs((double)f) > fabs(d)) u -= 1u;  /* toward zero (inf becomes the largest float) */
  return fl_bits_f(u | 1u);
}}
{q} float fl_bf2f(unsigned short b) {{ return fl_bits_f((unsigned int)b << 16); }}
{q} unsigned short fl_f2bf(float f) {{
  unsigned int u = fl_f_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | ((u & 0x7f0000u) ? 0u : 0x40u));
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}}
"""


def half_helpers(fn_prefix: str) -> str:
    """The conversion functions, with ``fn_prefix`` (``static inline``, or CUDA's device
    qualifiers) before each."""
    return _SOURCE.format(q=fn_prefix)


def widen(dtype: str, ref: str) -> str:
    """C text loading ``ref`` (an element of a ``dtype`` array) as a compute value."""
    if dtype in HALF_FLOATS:
        return f"{CONVERSIONS[dtype][0]}({ref})"
    return ref


def narrow(dtype: str, value: str, double: bool = False) -> str:
    """C text of ``value`` (float32, or a double with ``double``) rounded to the 16-bit
    ``dtype``."""
    if double and dtype == "float16":
        value = f"fl_d2f_odd({value})"
    return f"{CONVERSIONS[dtype][1]}({value})"


def rounded(dtype: str, value: str) -> str:
    """C text of float32 ``value`` rounded to the 16-bit ``dtype`` and widened back: for
    bfloat16 one function that stays in 32-bit lanes (the same bits as the round trip)."""
    if dtype == "bfloat16":
        return f"fl_bf_round({value})"
    return widen(dtype, narrow(dtype, value))


__all__ = ["CONVERSIONS", "half_helpers", "narrow", "rounded", "widen"]
