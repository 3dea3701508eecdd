"""The C and CUDA spelling of ops.scalar.BitCast: a value's bits as another dtype.

The value goes to an unsigned integer of its width first, then to the target: for an
integer that is C's conversion to unsigned (modulo 2**n, which is its two's-complement
bits), for a float a union (defined in C, and what GCC and NVCC compile C++ unions to),
and for a 16-bit float, computed in float32 (backend.half), its exact narrowing to its
bit pattern. The way back mirrors it. Integers and bool first go through their own C type:
a statement may compute them in double, and a double converts to an unsigned type only
when it is in range.
"""

from __future__ import annotations

#: dtype -> the unsigned C integer of its width
UNSIGNED = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}

#: float dtypes -> (to bits, from bits) helper names (float16's are backend.half's)
FLOAT_BITS = {"float32": ("fl_f_bits", "fl_bits_f"), "float64": ("fl_d_bits", "fl_bits_d"),
              "float16": ("fl_f2h", "fl_h2f"), "bfloat16": ("fl_f2bf", "fl_bf2f")}

_SOURCE = """{q} double fl_bits_d(unsigned long long u) {{ union {{ unsigned long long u; double d; }} v; v.u = u; return v.d; }}
{q} unsigned long long fl_d_bits(double d) {{ union {{ double d; unsigned long long u; }} v; v.d = d; return v.u; }}
"""


def bitcast_helpers(fn_prefix: str) -> str:
    """float64 <-> bits (float32's pair lives with the 16-bit float conversions)."""
    return _SOURCE.format(q=fn_prefix)


def bitcast_c(value: str, source: str, target: str, itemsize: int, ctype_of) -> str:
    """C text of ``value`` (a ``source`` value) with its bits read as ``target``;
    ``ctype_of(dtype)`` is the flavor's C type of a dtype."""
    unsigned = UNSIGNED[itemsize]
    if source in FLOAT_BITS:
        bits = f"(({unsigned}){FLOAT_BITS[source][0]}({value}))"
    else:
        bits = f"(({unsigned})(({ctype_of(source)})({value})))"
    if target in FLOAT_BITS:
        return f"{FLOAT_BITS[target][1]}({bits})"
    return f"(({ctype_of(target)}){bits})"
