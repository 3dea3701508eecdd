"""Dtypes whose stored bytes are not a C value of their type: each load decodes the byte
and each store encodes the result, with helper functions every translation unit carries.

* the float8 types (backend.float8_c): a float8 byte <-> float;
* float4_e2m1fn (FLOAT4E2M1): sign, 2 exponent bits (bias 1), 1 mantissa bit in the low
  four bits; stores round to nearest even and saturate at 6, and NaN becomes a zero of
  the opposite sign, bit for bit as ml_dtypes converts;
* int4, uint4, int2 and uint2: the value in the low four or two bits (ml_dtypes' layout,
  the top one the sign of the signed types) <-> an integer, stores keeping the low bits
  of the truncated value (ir.narrow_int.to_narrow_int defines it).
"""

from __future__ import annotations

from typing import cast

from fusionlang.backend.float8_c import FORMATS, decoder, encoder, float8_helpers
from fusionlang.ir.narrow_int import NARROW_INT_BITS

#: float4 dtype -> (decoder, encoder)
_FLOAT4 = {"float4_e2m1fn": ("fl_e2m1_to_float", "fl_float_to_e2m1")}

_FLOAT4_HELPERS = """{q} float fl_e2m1_to_float(unsigned char b) {{
  union {{ unsigned int u; float f; }} v;
  unsigned int mag = b & 7u, e = mag >> 1, m = mag & 1u;
  v.u = e ? ((e + 126u) << 23) | (m << 22) : (m ? 0x3F000000u : 0u);  /* e = 0: 0 or 0.5 */
  v.u |= (unsigned int)(b & 8u) << 28;
  return v.f;
}}
{q} unsigned char fl_float_to_e2m1(float x) {{
  union {{ float f; unsigned int u; }} v;
  v.f = x;
  unsigned int sign = (v.u >> 28) & 8u, a = v.u & 0x7FFFFFFFu, e = a >> 23, mag;
  if (a > 0x7F800000u) return (unsigned char)(sign ^ 8u);
  if (e >= 127u) {{  /* |x| >= 1: round the float's mantissa to one bit, to nearest even */
    mag = ((a + (1u << 21) - 1u + ((a >> 22) & 1u)) >> 22) - (126u << 1);
  }} else {{  /* below 1: round |x| * 2 to an integer, to nearest even */
    unsigned int full = (a & 0x7FFFFFu) | (e ? 0x800000u : 0u), s = 149u - (e ? e : 1u);
    mag = s > 24u ? 0u : (full + (1u << (s - 1u)) - 1u + ((full >> s) & 1u)) >> s;
  }}
  return (unsigned char)(sign | (mag > 7u ? 7u : mag));
}}
"""

_NARROW_INT_HELPERS = """{q} int fl_narrow_int_value(unsigned char b, int bits, int is_signed) {{
  int v = b & ((1 << bits) - 1), sign = 1 << (bits - 1);
  return is_signed ? (v ^ sign) - sign : v;
}}
{q} unsigned char fl_to_narrow_int(double v, int bits) {{
  /* NaN, infinities and values past the 64-bit range give 0 (ir.narrow_int); float32
     values from 2**27 on are multiples of 16 anyway */
  if (!(v > -9.2233720368547758e18 && v < 9.2233720368547758e18)) return 0;
  return (unsigned char)((unsigned long long)(long long)v & ((1u << bits) - 1u));
}}
"""


def codec(dtype: str) -> tuple[str, str] | None:
    """(decoder, encoder) helper names of a dtype stored encoded, else None."""
    if dtype in FORMATS:
        return decoder(dtype), encoder(dtype)
    if dtype in NARROW_INT_BITS:
        return f"fl_{dtype}_value", f"fl_to_{dtype}"
    return _FLOAT4.get(dtype)


def codec_helpers(prefix: str) -> str:
    """The helpers, once per translation unit; ``prefix`` qualifies functions."""
    out = [float8_helpers(prefix), _FLOAT4_HELPERS.format(q=prefix), _NARROW_INT_HELPERS.format(q=prefix)]
    for dtype, bits in NARROW_INT_BITS.items():  # each type's constants passed to the generic function
        decode, encode = cast(tuple[str, str], codec(dtype))  # a narrow int always has one
        signed = int(not dtype.startswith("u"))
        out.append(f"{prefix} int {decode}(unsigned char b) {{ return fl_narrow_int_value(b, {bits}, {signed}); }}\n"
                   f"{prefix} unsigned char {encode}(double v) {{ return fl_to_narrow_int(v, {bits}); }}\n")
    return "".join(out)


#: dtypes stored encoded that hold floats (a load is a float, not a C integer)
FLOAT_CODED = tuple(FORMATS) + ("float4_e2m1fn",)
