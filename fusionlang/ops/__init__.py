"""What an op computes and accesses: the registry of op definitions, the NumPy reference
interpreter, access specs for the loop layer, and a graph builder.

Op categories (elemwise, reduce, ...) are not here: they are policy, written in .fuse files.
"""

from fusionlang.ops import activation as _activation  # noqa: F401  (importing a family registers its ops)
from fusionlang.ops import attention as _attention  # noqa: F401
from fusionlang.ops import bitcast as _bitcast  # noqa: F401
from fusionlang.ops import bitshift as _bitshift  # noqa: F401
from fusionlang.ops import bitwise as _bitwise  # noqa: F401
from fusionlang.ops import classify as _classify  # noqa: F401
from fusionlang.ops import concat as _concat  # noqa: F401
from fusionlang.ops import constant as _constant  # noqa: F401
from fusionlang.ops import conv as _conv  # noqa: F401
from fusionlang.ops import cumsum as _cumsum  # noqa: F401
from fusionlang.ops import elementwise as _elementwise  # noqa: F401
from fusionlang.ops import gather as _gather  # noqa: F401
from fusionlang.ops import gather_elements as _gather_elements  # noqa: F401
from fusionlang.ops import gather_nd as _gather_nd  # noqa: F401
from fusionlang.ops import index_of as _index_of  # noqa: F401
from fusionlang.ops import linalg as _linalg  # noqa: F401
from fusionlang.ops import loss as _loss  # noqa: F401
from fusionlang.ops import lp_norm as _lp_norm  # noqa: F401
from fusionlang.ops import norm as _norm  # noqa: F401
from fusionlang.ops import norm_grouped as _norm_grouped  # noqa: F401
from fusionlang.ops import pad as _pad  # noqa: F401
from fusionlang.ops import pool as _pool  # noqa: F401
from fusionlang.ops import quantize as _quantize  # noqa: F401
from fusionlang.ops import reduce as _reduce  # noqa: F401
from fusionlang.ops import remainder as _remainder  # noqa: F401
from fusionlang.ops import resize as _resize  # noqa: F401
from fusionlang.ops import rms_norm as _rms_norm  # noqa: F401
from fusionlang.ops import rotary as _rotary  # noqa: F401
from fusionlang.ops import repeat as _repeat  # noqa: F401
from fusionlang.ops import shape as _shape  # noqa: F401
from fusionlang.ops import slicing as _slicing  # noqa: F401
from fusionlang.ops import softmax as _softmax  # noqa: F401
from fusionlang.ops import trilu as _trilu  # noqa: F401
from fusionlang.ops import scatter as _scatter  # noqa: F401
from fusionlang.ops import one_hot as _one_hot  # noqa: F401
from fusionlang.ops import sorting as _sorting  # noqa: F401
from fusionlang.ops import grid_sample as _grid_sample  # noqa: F401
from fusionlang.ops import col2im as _col2im  # noqa: F401
from fusionlang.ops.access import ACC, REDUCTIONS, Read, Stmt, i_sym, r_sym, v_sym
from fusionlang.ops.builder import GraphBuilder
from fusionlang.ops.checking import op_call, verify_graph
from fusionlang.ops.interpreter import check_feeds, run
from fusionlang.ops.registry import REGISTRY, Attr, OpCall, OpDef, OpRegistry

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
