"""Python's cyclic garbage collector, paused while fusionlang works.

Loading rules, importing, fusing and compiling allocate hundreds of thousands of objects
that live until the call returns (lark tokens and trees, the rule AST, sympy expressions,
isl wrappers) and almost no reference cycles. Each burst of allocations triggers
collections that find nothing, and a full one walks every object in the process, the
caller's included: about 0.1 s of a cold compile of squeezenet (0.04 s of it decoding the
parser tables, which are plain lists and dicts). :func:`paused` switches the collector off
for the duration of a call and back on after it. Reference counting frees as usual; a
cycle made during the call is collected by the first collection after it. A caller that
switched the collector off itself (or a nested call of ours) is left as it is.
"""

from __future__ import annotations

import functools
import gc


def paused(fn):
    """``fn`` run with the cyclic collector off (when it was on)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()

    return wrapper


__all__ = ["paused"]
