"""C / CUDA conversions between float32 and the float8 storage types (see ir.float8).

A float8 tensor is stored as one byte; a load decodes it to float32 and a store encodes a
float32 with round to nearest even, exactly as ml_dtypes' ``astype`` (so ONNX's reference)
does, bit for bit: an overflow (after rounding) becomes NaN, or infinity for E5M2; the
FNUZ types have no negative zero and one NaN, 0x80. Saturation (ONNX's default) is the
clamp the cast's formula applies before the store, not the store's business.

The conversions work on the bits with integer arithmetic only: no dependence on the
floating-point rounding mode, no libm, the same text in C and CUDA. Each type's wrapper
passes constants to one generic function, which the compiler folds after inlining.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Float8Format:
    """The parameters of one float8 encoding."""

    suffix: str
    mantissa_bits: int
    bias: int
    #: 0: the E4M3FN NaN (S.1111.111, no infinity), 1: FNUZ (0x80 is the NaN, no -0, no
    #: infinity), 2: IEEE style (E5M2: the top exponent holds infinity and NaNs)
    special: int
    #: largest finite magnitude code, and the code an overflow or NaN becomes (without sign)
    max_code: int
    overflow_code: int
    nan_code: int


FORMATS = {
    "float8_e4m3fn": Float8Format("e4m3fn", 3, 7, 0, 0x7E, 0x7F, 0x7F),
    "float8_e4m3fnuz": Float8Format("e4m3fnuz", 3, 8, 1, 0x7F, 0x80, 0x80),
    "float8_e5m2": Float8Format("e5m2", 2, 15, 2, 0x7B, 0x7C, 0x7E),
    "float8_e5m2fnuz": Float8Format("e5m2fnuz", 2, 16, 1, 0x7F, 0x80, 0x80),
}


def decoder(dtype: str) -> str:
    """The helper that turns a stored byte of ``dtype`` into a float."""
    return f"fl_{FORMATS[dtype].suffix}_to_float"


def encoder(dtype: str) -> str:
    """The helper that turns a float into a stored byte of ``dtype``."""
    return f"fl_float_to_{FORMATS[dtype].suffix}"


_GENERIC = """{q} float fl_f8_decode(unsigned int b, int mbits, int bias, int special) {{
  union {{ unsigned int u; float f; }} v;
  unsigned int sign = (b & 0x80u) << 24, mag = b & 0x7Fu;
  unsigned int e = mag >> mbits, m = mag & ((1u << mbits) - 1u);
  if ((special == 1 && b == 0x80u) || (special == 0 && mag == 0x7Fu) || (special == 2 && e == (0x7Fu >> mbits) && m)) {{
    v.u = sign | 0x7FC00000u;
  }} else if (special == 2 && e == (0x7Fu >> mbits)) {{
    v.u = sign | 0x7F800000u;
  }} else if (e == 0) {{  /* subnormal: m * 2^(1 - bias - mbits), exact in float */
    v.u = (unsigned int)(127 + 1 - bias - mbits) << 23;
    v.f = (float)m * v.f;
    v.u |= sign;
  }} else {{
    v.u = sign | ((e + 127u - (unsigned int)bias) << 23) | (m << (23 - mbits));
  }}
  return v.f;
}}
{q} unsigned char fl_f8_encode(float x, int mbits, int bias, int special, unsigned int max_code,
                                unsigned int overflow_code, unsigned int nan_code) {{
  union {{ float f; unsigned int u; }} v;
  v.f = x;
  unsigned int sign = (v.u >> 24) & 0x80u, a = v.u & 0x7FFFFFFFu, e = a >> 23, mag;
  if (a > 0x7F800000u) return (unsigned char)(special == 1 ? nan_code : sign | nan_code);
  if (e + (unsigned int)bias >= 128u) {{  /* a normal float8: round the float's mantissa to nearest even */
    unsigned int s = 23u - (unsigned int)mbits;
    mag = (a + (1u << (s - 1u)) - 1u + ((a >> s) & 1u)) >> s;
    mag -= (127u - (unsigned int)bias) << mbits;
  }} else {{  /* a float8 subnormal (or zero): round m = |x| * 2^(bias - 1 + mbits) to nearest even */
    unsigned int full = (a & 0x7FFFFFu) | (e ? 0x800000u : 0u);
    unsigned int s = 151u - (unsigned int)bias - (unsigned int)mbits - (e ? e : 1u);
    mag = s > 24u ? 0u : (full + (1u << (s - 1u)) - 1u + ((full >> s) & 1u)) >> s;
  }}
  if (mag > max_code) return (unsigned char)(special == 1 ? overflow_code : sign | overflow_code);
  return (unsigned char)(special == 1 && mag == 0u ? 0u : sign | mag);
}}
"""


def float8_helpers(prefix: str) -> str:
    """The conversion helpers, once per translation unit; ``prefix`` qualifies functions."""
    out = [_GENERIC.format(q=prefix)]
    for dtype, f in FORMATS.items():
        out.append(f"{prefix} float {decoder(dtype)}(unsigned char b) {{ "
                   f"return fl_f8_decode(b, {f.mantissa_bits}, {f.bias}, {f.special}); }}\n")
        out.append(f"{prefix} unsigned char {encoder(dtype)}(float x) {{ return fl_f8_encode(x, {f.mantissa_bits}, "
                   f"{f.bias}, {f.special}, 0x{f.max_code:X}u, 0x{f.overflow_code:X}u, 0x{f.nan_code:X}u); }}\n")
    return "".join(out)
