"""Floor-division and mod of a linear form over index symbols, simplified exactly with the
symbols' extents.

Reshapes and flattens index their input with ``floor(L / d)`` and ``Mod(L, n)`` of a
linear form ``L`` over loop indices. sympy simplifies such forms only through its
assumption system, slowly and not always: ``floor((3136*i0 + 56*i1 + i2) / 12544)`` stays
as it is although, with ``i1, i2 < 56``, it is ``floor(i0 / 4)``. A division left in an
index costs the printed loop its vectorization and isl an existential variable.

Both rules split ``L = H + R`` where every coefficient of ``H`` is a multiple of ``g``
(which divides the divisor) and ``0 <= R < g`` over the symbols' ranges:

* ``floor(L / d) = floor((H/g) / (d/g))``, since ``H <= L < H + g``;
* ``Mod(L, n) = g * Mod(H/g, n/g) + R``.

A term whose coefficient is a multiple of the divisor leaves the floor whole (and drops out
of a mod). Forms these rules do not cover are left to sympy, as before.
"""

from __future__ import annotations

from math import gcd, lcm
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import sp

#: a linear form: (coefficient, symbol) terms over symbols of known extent, and a constant
Terms = tuple[tuple[int, "sp.Symbol"], ...]


def floor_div(terms: Terms, const: int, d: int, extents: dict[sp.Symbol, int]) -> sp.Expr:
    """floor((sum(c * x) + const) / d) for d > 0."""
    whole = [(c // d, x) for c, x in terms if c % d == 0]
    rest = [(c, x) for c, x in terms if c % d]
    quotient = _sum(whole) + const // d
    const %= d
    split = _split(rest, const, d, extents)
    if split is None:
        return quotient + sp.floor((_sum(rest) + const) / d)
    high, _, high_const, g = split
    if g == d:
        return quotient + high_const // g
    return quotient + sp.floor((_sum([(c // g, x) for c, x in high]) + high_const // g) / (d // g))


def mod(terms: Terms, const: int, n: int, extents: dict[sp.Symbol, int]) -> sp.Expr:
    """Mod(sum(c * x) + const, n) for n > 0."""
    terms = [(c % n, x) for c, x in terms if c % n]
    const %= n
    split = _split(terms, const, n, extents)
    if split is None:
        return sp.Mod(_sum(terms) + const, n)
    high, low_terms, high_const, g = split
    low = _sum(low_terms) + (const - high_const)
    if not high:
        return low
    inner = _sum([(c // g, x) for c, x in high]) + high_const // g
    if _range(high, high_const, extents)[1] < n:
        return g * inner + low  # the mod never wraps
    return g * sp.Mod(inner, n // g) + low


def _split(terms, const: int, divisor: int, extents) -> tuple[list, list, int, int] | None:
    """(the high terms, the low terms, the high constant, g) with g dividing ``divisor``
    and every high coefficient, and the low terms plus the rest of the constant within
    [0, g); the split with the fewest high terms (largest g), or None."""
    ordered = sorted(terms, key=lambda t: -abs(t[0]))
    for cut in range(len(ordered) + 1):
        high, low = ordered[:cut], ordered[cut:]
        g = gcd(divisor, *(c for c, _ in high))
        low_lo, low_hi = _range(low, const % g, extents)
        if 0 <= low_lo and low_hi < g:
            return high, low, const - const % g, g
    return None


def _range(terms, const: int, extents) -> tuple[int, int]:
    lo = const + sum(min(0, c * (extents[x] - 1)) for c, x in terms)
    hi = const + sum(max(0, c * (extents[x] - 1)) for c, x in terms)
    return lo, hi


def linear_form(expr: sp.Expr, extents) -> tuple[Terms, int, int] | None:
    """(integer terms, integer constant, denominator) with expr = (terms + constant) /
    denominator, or None when expr is not linear in ``extents``' symbols."""
    coefficients = sp.expand(expr).as_coefficients_dict()
    if any(k != 1 and k not in extents for k in coefficients):
        return None
    if not all(v.is_Rational for v in coefficients.values()):
        return None
    denominator = lcm(*(int(v.q) for v in coefficients.values()))
    terms = tuple((int(v * denominator), k) for k, v in coefficients.items() if k != 1 and v != 0)
    return terms, int(coefficients.get(sp.S.One, 0) * denominator), denominator


def _sum(terms) -> sp.Expr:
    return sum((c * x for c, x in terms), sp.Integer(0))


__all__ = ["Terms", "floor_div", "linear_form", "mod"]
