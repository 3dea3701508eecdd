"""Dtypes whose stored bytes are not a C value of their type: each load decodes the byte
and each store encodes the result, with helper functions every translation unit carries.

* the float8 types (backend.float8_c): a float8 byte <-> float;
* int4 and uint4: the value in the low four bits (ml_dtypes' layout, sign in bit 3 for
  int4) <-> an integer, stores keeping the low four bits of the truncated value, as
  ml_dtypes converts (ir.int4).
"""

from __future__ import annotations

from fusionlang.backend.float8_c import FORMATS, decoder, encoder, float8_helpers

#: int4/uint4 dtype -> (decoder, encoder)
_INT4 = {"int4": ("fl_int4_value", "fl_to_int4"), "uint4": ("fl_uint4_value", "fl_to_uint4")}

_INT4_HELPERS = """{q} int fl_int4_value(unsigned char b) {{ return (int)((b & 15) ^ 8) - 8; }}
{q} int fl_uint4_value(unsigned char b) {{ return b & 15; }}
{q} unsigned char fl_to_int4(double v) {{
  /* NaN, infinities and values past the 64-bit range give 0, as ml_dtypes; float32 values
     from 2**27 on are multiples of 16 anyway */
  if (!(v > -9.2233720368547758e18 && v < 9.2233720368547758e18)) return 0;
  return (unsigned char)((unsigned long long)(long long)v & 15u);
}}
{q} unsigned char fl_to_uint4(double v) {{ return fl_to_int4(v); }}
"""


def codec(dtype: str) -> tuple[str, str] | None:
    """(decoder, encoder) helper names of a dtype stored encoded, else None."""
    if dtype in FORMATS:
        return decoder(dtype), encoder(dtype)
    return _INT4.get(dtype)


def codec_helpers(prefix: str) -> str:
    """The helpers, once per translation unit; ``prefix`` qualifies functions."""
    return float8_helpers(prefix) + _INT4_HELPERS.format(q=prefix)


#: dtypes stored encoded that hold floats (a load is a float, not a C integer)
FLOAT_CODED = tuple(FORMATS)
