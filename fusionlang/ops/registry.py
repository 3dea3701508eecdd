"""OpDef and OpRegistry: what an op is called, what it takes, and where its behaviour lives.

An OpDef bundles, for one op: its inputs and attributes (with defaults), shape/dtype
inference, a vectorized NumPy reference, and an access spec (the loop form the polyhedral
layer fuses). Fusion *categories* are deliberately absent: they come from .fuse files.

Nodes always carry a full, normalized attribute dict (:meth:`OpDef.normalize_attrs`):
every attribute present, ints as int, lists as tuples, dtypes as numpy names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence, cast

import numpy as np

from fusionlang.errors import ShapeError, UnsupportedOpError
from fusionlang.ir.types import TensorType, canonical_dtype

REQUIRED = object()

ATTR_KINDS = ("int", "float", "str", "ints", "floats", "tensor", "dtype", "expr")


@dataclass(frozen=True)
class Attr:
    """One attribute: its kind (see ATTR_KINDS), a default (REQUIRED if none), a note.

    A default of None marks an optional attribute with no value; None stays None.
    """

    kind: str
    default: Any = REQUIRED
    doc: str = ""
    #: a float attribute that may be NaN (a fill value); elsewhere NaN is refused: it is no
    #: bound, slope or scale, and the loop body's formula cannot compare with it
    nan_ok: bool = False

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass
class OpCall:
    """What inference and access specs see of one node: attrs and operand types."""

    op: str
    node: str
    attrs: dict[str, Any]
    in_types: list[TensorType | None]
    out_types: list[TensorType] = field(default_factory=list)
    #: arrays of inputs known at graph-build time (constants), by position; None where
    #: unknown. Only ops whose output *shape* depends on input values read it.
    in_values: list[np.ndarray | None] = field(default_factory=list)

    def fail(self, message: str) -> ShapeError:
        """An error to raise, located at this node."""
        return ShapeError(f"node {self.node!r} ({self.op}): {message}")

    def input(self, k: int) -> TensorType:
        found = self.in_types[k] if k < len(self.in_types) else None
        if found is None:
            raise self.fail(f"input {k} is required")
        return found

    def has_input(self, k: int) -> bool:
        return k < len(self.in_types) and self.in_types[k] is not None

    def value(self, k: int) -> np.ndarray:
        """The array of input k, which must be a constant known at graph-build time."""
        self.input(k)
        found = self.in_values[k] if k < len(self.in_values) else None
        if found is None:
            raise self.fail(f"input {k} must be a constant (its value decides the output shape)")
        return found

    def axis(self, axis: int, rank: int, *, name: str = "axis", inclusive: bool = False) -> int:
        """Normalize a possibly negative axis against ``rank`` (``inclusive``: rank allowed)."""
        upper = rank + 1 if inclusive else rank
        if not -upper <= axis < upper:
            raise self.fail(f"{name}={axis} is out of range for rank {rank}")
        return axis % upper if upper else 0


InferFn = Callable[[OpCall], list[TensorType]]
ReferenceFn = Callable[[list, dict], list]
AccessFn = Callable[[OpCall], list]


@dataclass
class OpDef:
    """Everything fusionlang knows about one op: its inputs and attributes, shape
    inference, NumPy reference, access spec (its loop form), and whether it is compound or a view."""

    name: str
    #: input names, for documentation and for .fuse arity checks; variadic ops list one
    inputs: tuple[str, ...]
    infer: InferFn
    reference: ReferenceFn
    #: None: the op has no single loop form (a compound op must be decomposed first,
    #: or it is only ever constant-folded)
    access: AccessFn | None = None
    attrs: dict[str, Attr] = field(default_factory=dict)
    min_inputs: int | None = None
    max_inputs: int | None = None  # None with variadic=True: unbounded
    variadic: bool = False
    num_outputs: int = 1
    #: outputs the op may have beyond num_outputs (ONNX optional outputs / split counts)
    max_outputs: int | None = None
    #: needs decomposition (a `decompose` rule) before code generation
    compound: bool = False
    #: True, or a predicate on the call: the op only re-labels contiguous data (free)
    view: bool | Callable[[OpCall], bool] = False
    #: operands may be swapped (every order, for a variadic op): a property of the op
    #: itself, so rule sets see it without declaring it (`class OP : commutative`)
    commutative: bool = False
    doc: str = ""

    def __post_init__(self):
        if self.min_inputs is None:
            self.min_inputs = len(self.inputs)
        if self.max_inputs is None and not self.variadic:
            self.max_inputs = len(self.inputs)
        if self.max_outputs is None:
            self.max_outputs = self.num_outputs

    # ----- checking -----------------------------------------------------------------
    def normalize_attrs(self, attrs: dict[str, Any], where: str) -> dict[str, Any]:
        """Full attribute dict with defaults filled and values canonicalized.

        ``where`` locates errors ("node 'conv_3'" or "rules.fuse:4:7").
        """
        unknown = sorted(set(attrs) - set(self.attrs))
        if unknown:
            known = ", ".join(sorted(self.attrs)) or "none"
            raise ShapeError(f"{where} ({self.name}): unknown attribute {unknown[0]!r} (known: {known})")
        out: dict[str, Any] = {}
        for name, spec in self.attrs.items():
            if name in attrs and attrs[name] is None and spec.default is None:
                out[name] = None  # an optional attribute that stays absent
            elif name in attrs:
                out[name] = _canonical_attr(spec.kind, attrs[name], f"{where} ({self.name}) attribute {name!r}")
                if spec.kind == "float" and not spec.nan_ok and out[name] is not None and math.isnan(out[name]):
                    raise ShapeError(f"{where} ({self.name}): attribute {name!r} is NaN; it takes a number")
            elif spec.required:
                raise ShapeError(f"{where} ({self.name}): missing required attribute {name!r}")
            else:
                out[name] = spec.default
        return out

    def check_arity(self, n_inputs: int, where: str) -> None:
        low, high = cast(int, self.min_inputs), self.max_inputs  # __post_init__ set min_inputs
        if n_inputs < low or (high is not None and n_inputs > high):
            expect = f"{low}" if low == high else (f"{low} to {high}" if high is not None else f"at least {low}")
            raise ShapeError(f"{where} ({self.name}): expects {expect} inputs, got {n_inputs}")

    def is_view(self, call: OpCall) -> bool:
        return self.view(call) if callable(self.view) else bool(self.view)

    def run_infer(self, call: OpCall) -> list[TensorType]:
        types = self.infer(call)
        return list(types)


def _canonical_attr(kind: str, value: Any, where: str) -> Any:
    try:
        if kind == "int":
            if isinstance(value, (bool, np.bool_)) or not float(value).is_integer():
                raise ValueError
            return int(value)
        if kind == "float":
            # an integer a float cannot hold stays exact (an int64 Clip bound of 2**62 - 1)
            if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) \
                    and float(value) != int(value):
                return int(value)
            return float(value)
        if kind == "str":
            if isinstance(value, bytes):
                value = value.decode()
            if not isinstance(value, str):
                raise ValueError
            return value
        if kind == "ints":
            values = tuple(np.asarray(value).ravel().tolist()) if not isinstance(value, (list, tuple)) else tuple(value)
            if any(isinstance(v, float) and not v.is_integer() for v in values):
                raise ValueError
            return tuple(int(v) for v in values)
        if kind == "floats":
            values = value if isinstance(value, (list, tuple)) else np.asarray(value).ravel().tolist()
            return tuple(float(v) for v in values)
        if kind == "tensor":
            return np.asarray(value)
        if kind == "dtype":
            try:
                return canonical_dtype(value)
            except ShapeError as exc:
                raise ShapeError(f"{where}: {exc}") from None
        if kind == "expr":
            return value
    except (TypeError, ValueError, OverflowError) as exc:
        raise ShapeError(f"{where}: expected {kind}, got {value!r}") from exc
    raise ShapeError(f"{where}: unknown attribute kind {kind!r}")


class OpRegistry:
    """Op name -> OpDef. ``child()`` makes a registry that adds ops (from `def` rules)
    on top of this one without changing it."""

    def __init__(self, parent: "OpRegistry | None" = None):
        self._ops: dict[str, OpDef] = {}
        self.parent = parent
        self._populate: Callable[[], None] | None = None

    def populate_with(self, populate: Callable[[], None]) -> None:
        """Run ``populate`` (which registers ops) before the first lookup: importing the op
        families (some fifty modules) is work a rule file that names no op never needs."""
        self._populate = populate

    def _defined(self) -> dict[str, OpDef]:
        populate, self._populate = self._populate, None
        if populate is not None:
            populate()
        return self._ops

    def register(self, opdef: OpDef) -> OpDef:
        # the ops registered so far, not populating: a family registers while it is imported
        if opdef.name in self._ops or (self.parent is not None and opdef.name in self.parent):
            raise ValueError(f"op {opdef.name!r} is registered twice")
        self._ops[opdef.name] = opdef
        return opdef

    def child(self) -> "OpRegistry":
        return OpRegistry(parent=self)

    def lookup(self, name: str) -> OpDef | None:
        found = self._defined().get(name)
        if found is None and self.parent is not None:
            return self.parent.lookup(name)
        return found

    def get(self, name: str, where: str = "") -> OpDef:
        found = self.lookup(name)
        if found is None:
            prefix = f"{where}: " if where else ""
            raise UnsupportedOpError(f"{prefix}unknown op {name!r}")
        return found

    def __contains__(self, name: str) -> bool:
        return self.lookup(name) is not None

    def registered(self) -> int:
        """How many ops have been registered here and in the parents so far, without
        filling the registry: it only grows, so it tells a cache when ops were added."""
        return len(self._ops) + (self.parent.registered() if self.parent else 0)

    def names(self) -> list[str]:
        inherited = self.parent.names() if self.parent else []
        return sorted(set(inherited) | set(self._defined()))

    def __iter__(self) -> Iterable[OpDef]:
        return iter(self.get(n) for n in self.names())

    def call(self, op: str, node: str, attrs: dict, in_types: Sequence[TensorType | None],
             in_values: list | None = None) -> tuple[OpDef, OpCall]:
        """Check arity and attributes of a would-be node; return its OpDef and OpCall.

        ``in_values``: arrays of constant inputs (None elsewhere), for value-dependent shapes.
        """
        opdef = self.get(op, f"node {node!r}")
        where = f"node {node!r}"
        opdef.check_arity(len(in_types), where)
        return opdef, OpCall(op, node, opdef.normalize_attrs(attrs, where), list(in_types),
                             in_values=list(in_values or []))

    def infer(self, op: str, node: str, attrs: dict, in_types: Sequence[TensorType | None],
              in_values: list | None = None) -> list[TensorType]:
        opdef, call = self.call(op, node, attrs, in_types, in_values)
        return opdef.run_infer(call)


#: the built-in ops; populated by the op-family modules fusionlang.ops imports on the first lookup
REGISTRY = OpRegistry()


def registry_of(graph, registry: OpRegistry | None = None) -> OpRegistry:
    """The registry to interpret ``graph`` with: explicit, else the graph's, else built-ins."""
    return registry or graph.registry or REGISTRY


def register(opdef: OpDef) -> OpDef:
    return REGISTRY.register(opdef)
