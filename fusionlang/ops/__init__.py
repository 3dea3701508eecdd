"""What an op computes and accesses: the registry of op definitions, the NumPy reference
interpreter, access specs for the loop layer, and a graph builder.

Op categories (elemwise, reduce, ...) are not here: they are policy, written in .fuse files.
"""

from typing import TYPE_CHECKING

from fusionlang.ops.registry import REGISTRY, Attr, OpCall, OpDef, OpRegistry

if TYPE_CHECKING:
    from fusionlang.ops.access import ACC, REDUCTIONS, Read, Stmt, i_sym, r_sym, v_sym
    from fusionlang.ops.builder import GraphBuilder
    from fusionlang.ops.checking import op_call, verify_graph
    from fusionlang.ops.interpreter import check_feeds, run


def _register_families() -> None:
    """Import every op family: importing one registers its ops."""
    from fusionlang.ops import (  # noqa: F401
        activation,
        attention,
        bitcast,
        bitshift,
        bitwise,
        classify,
        concat,
        constant,
        conv,
        cumsum,
        elementwise,
        gather,
        gather_elements,
        gather_nd,
        index_of,
        linalg,
        loss,
        lp_norm,
        norm,
        norm_grouped,
        pad,
        pool,
        quantize,
        reduce,
        remainder,
        resize,
        rms_norm,
        rotary,
        repeat,
        shape,
        slicing,
        softmax,
        trilu,
        scatter,
        segment_sum,
        one_hot,
        sorting,
        grid_sample,
        col2im,
    )


REGISTRY.populate_with(_register_families)


#: the names imported on first use, by module: reading a rule file that names no op
#: (`lint`) needs none of them
_ON_FIRST_USE = {
    "access": ("ACC", "REDUCTIONS", "Read", "Stmt", "i_sym", "r_sym", "v_sym"),
    "builder": ("GraphBuilder",),
    "checking": ("op_call", "verify_graph"),
    "interpreter": ("check_feeds", "run"),
}


def __getattr__(name: str):
    module = next((m for m, names in _ON_FIRST_USE.items() if name in names), None)
    if module is None:  # a submodule not imported yet, among others: the import system goes on
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from fusionlang.ops import access, builder, checking, interpreter
    return getattr({"access": access, "builder": builder, "checking": checking,
                    "interpreter": interpreter}[module], name)


__all__ = [
    "ACC",
    "REDUCTIONS",
    "REGISTRY",
    "Attr",
    "GraphBuilder",
    "OpCall",
    "OpDef",
    "OpRegistry",
    "Read",
    "Stmt",
    "check_feeds",
    "i_sym",
    "op_call",
    "r_sym",
    "run",
    "v_sym",
    "verify_graph",
]
