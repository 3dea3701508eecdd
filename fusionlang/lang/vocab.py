"""The names the language itself knows: guard predicates, meta functions, formula
functions, test expectations and class flags, with their arities and argument kinds.

The checker validates calls against these tables, the evaluator (guards.py) and the
formula builder (formula.py) implement them, and docs/language.md lists them. An
argument kind is ``tensor`` (a tensor variable), ``value`` (any static value) or
``name`` (a bare identifier naming a rule, op or category).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Signature:
    #: kind of each argument; a trailing "*" kind repeats (at least once)
    args: tuple[str, ...]
    returns: str  # "bool", "int", "str", "list", "value"
    doc: str
    #: with no arguments, the predicate applies to the node being classified (class guards)
    subject_default: bool = False

    def arity_ok(self, n: int) -> bool:
        if self.args and self.args[-1].endswith("*"):
            return n >= len(self.args)
        if self.subject_default and n == 0:
            return True
        return n == len(self.args)

    def kind_of(self, k: int) -> str:
        if self.args and k >= len(self.args) - 1 and self.args[-1].endswith("*"):
            return self.args[-1].rstrip("*")
        return self.args[k] if k < len(self.args) else "value"

    def describe_arity(self) -> str:
        if self.args and self.args[-1].endswith("*"):
            return f"at least {len(self.args)} argument{'s' if len(self.args) > 1 else ''}"
        if self.subject_default:
            return f"0 or {len(self.args)} arguments"
        return f"{len(self.args)} argument{'s' if len(self.args) != 1 else ''}"


#: predicates usable in `where` guards, class `when` guards and test expectations
PREDICATES: dict[str, Signature] = {
    "const": Signature(("tensor*",), "bool", "every argument is a constant (after folding)"),
    "one_use": Signature(("tensor*",), "bool", "every argument is read by exactly one node and is not a graph output"),
    "broadcasting": Signature(("tensor",), "bool",
                              "the node computing the argument reads an input whose shape differs from its output's",
                              subject_default=True),
    "same_shape": Signature(("tensor", "tensor*"), "bool", "all arguments have the same shape"),
    "is_scalar": Signature(("tensor",), "bool", "the tensor has exactly one element"),
    "is_float": Signature(("tensor",), "bool", "the tensor has a floating-point dtype"),
    "reduced_only": Signature(("tensor*",), "bool",
                              "every argument is read by reductions (reduce_*) only and is not a graph output"),
    "all_equal": Signature(("tensor", "value"), "bool", "the tensor is a constant whose elements all equal the number"),
}

#: functions computing static values from tensor metadata and other static values
META: dict[str, Signature] = {
    "rank": Signature(("tensor",), "int", "number of dimensions"),
    "shape": Signature(("tensor",), "list", "the shape as a list"),
    "dim": Signature(("tensor", "value"), "int", "one dimension (negative counts from the end)"),
    "size": Signature(("tensor",), "int", "number of elements"),
    "dtype": Signature(("tensor",), "str", 'the dtype name, e.g. "float32"'),
    "value": Signature(("tensor",), "value", "the single element of a one-element constant"),
    "len": Signature(("value",), "int", "length of a list"),
    "range": Signature(("value", "value"), "list", "the integers a, a+1, ..., b-1"),
    "reversed": Signature(("value",), "list", "a list backwards"),
    "compose": Signature(("value", "value"), "list", "permutation p then q: result[k] = p[q[k]]"),
    "perm": Signature(("value", "value"), "list",
                      "a transpose perm, or the reversing perm of the given rank when it is empty (ONNX default)"),
    "prod": Signature(("value",), "int", "product of a list"),
    "min": Signature(("value", "value*"), "value", "smallest argument (static values only)"),
    "max": Signature(("value", "value*"), "value", "largest argument (static values only)"),
    "abs": Signature(("value",), "value", "absolute value (static values only)"),
}

#: functions allowed in `def` formulas, with their arity
FORMULA_FUNCTIONS: dict[str, int] = {
    "exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "erf": 1, "tanh": 1, "sigmoid": 1, "abs": 1,
    "sin": 1, "cos": 1, "floor": 1, "ceil": 1,
    "min": 2, "max": 2, "pow": 2, "select": 3,
}
#: names usable as constants in formulas
FORMULA_CONSTANTS = ("pi",)

#: test-block expectations: functions (name -> Signature) and bare names (value kind)
EXPECT_FUNCTIONS: dict[str, Signature] = {
    "fired": Signature(("name",), "int", "how often the rewrite rule fired"),
    "count": Signature(("name",), "int", "nodes with this op in the rewritten graph"),
    "op": Signature(("tensor",), "str", "op of the node computing the value in the rewritten graph"),
    "category": Signature(("tensor",), "str", "category of the node computing the value in the stated graph"),
    "grouped": Signature(("tensor", "tensor*"), "bool", "the values are computed in one fusion group"),
    "separate": Signature(("tensor", "tensor*"), "bool", "the values are computed in different fusion groups"),
    "stitched": Signature(("tensor",), "bool", "the value is kept on chip between two groups (memory stitching)"),
}
EXPECT_NAMES: dict[str, str] = {
    "equivalent": "the rewritten graph computes what the stated graph computes (reference interpreter)",
    "nodes": "number of nodes in the rewritten graph",
    "kernels": "number of kernel launches in the fusion plan of the rewritten graph (the same as launches)",
    "launches": "number of kernel launches in the fusion plan of the rewritten graph: a horizontal pack "
                "of groups is one launch, a group that only re-labels data (a free view) none",
    "groups": "number of groups in the fusion plan of the rewritten graph, each horizontally packed group "
              "and each free view counted",
}
#: expectations that need the partitioner
GROUPING_EXPECTATIONS = ("grouped", "separate", "stitched", "kernels", "launches", "groups")

#: flags a `class` declaration may carry besides its category
CLASS_FLAGS = ("commutative",)
#: bare flags a `fuse` entry may carry (key=value options are free-form, read by partitioners)
FUSE_FLAGS = ("stitch", "horizontal", "cost")

#: names that may not name a `def` op: they would clash with C/CUDA in generated code
RESERVED_NAMES = frozenset("""
auto break case char const continue default do double else enum extern float for goto if inline int long
register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
bool true false half __global__ __device__ __shared__ __host__ threadIdx blockIdx blockDim gridDim main
""".split())
