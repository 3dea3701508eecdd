"""Types of static values (guards, attribute values, static lets), for the checker.

Static expressions evaluate to integers, floats, booleans, strings and lists
(guards.py). The checker gives each expression one of these types, or ``any`` when it
cannot know (an attribute variable, ``value(c)``), and reports what would fail at every
evaluation: arithmetic on strings or lists other than ``+`` and ``* n``, ``and``/``or``
of numbers, ordering a number against a string, a guard that is not true or false, and
division by a literal zero. Such a rule would never fire, and nothing would say why.
"""

from __future__ import annotations

INT, FLOAT, NUMBER, BOOL, STR, LIST, ANY = "int", "float", "number", "bool", "str", "list", "any"

_WORDS = {INT: "an integer", FLOAT: "a number", NUMBER: "a number", BOOL: "true or false", STR: "a string",
          LIST: "a list", ANY: "a value"}

#: types of the static arguments of the meta functions (None: a tensor or any value)
META_ARGUMENTS: dict[str, tuple] = {
    "dim": (None, INT),
    "len": (LIST,),
    "range": (INT, INT),
    "reversed": (LIST,),
    "compose": (LIST, LIST),
    "perm": (LIST, INT),
    "prod": (LIST,),
    "abs": (NUMBER,),
}

#: the type each vocabulary return kind (vocab.Signature.returns) stands for
RETURNS = {"int": INT, "bool": BOOL, "str": STR, "list": LIST, "value": ANY}


def describe(t: str) -> str:
    return _WORDS[t]


def type_of_value(value) -> str:
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return FLOAT
    if isinstance(value, str):
        return STR
    if isinstance(value, tuple):
        return LIST
    return ANY


def is_number(t: str) -> bool:
    return t in (INT, FLOAT, NUMBER, ANY)


def fits(t: str, wanted: str) -> bool:
    """Whether a value of type ``t`` may be what ``wanted`` asks for."""
    if t == ANY or wanted == ANY:
        return True
    if wanted == NUMBER:
        return is_number(t)
    if wanted == INT:
        return t in (INT, NUMBER)
    return t == wanted


def _number_result(a: str, b: str) -> str:
    if a == b and a in (INT, FLOAT):
        return a
    return NUMBER if ANY not in (a, b) else ANY


def binop_type(op: str, a: str, b: str) -> tuple[str, str | None]:
    """(result type, None) or (ANY, why ``a op b`` has no value)."""
    if op == "+" and LIST in (a, b):
        if fits(a, LIST) and fits(b, LIST):
            return LIST, None
    elif op == "*" and a == LIST:
        if fits(b, INT):
            return LIST, None
    elif is_number(a) and is_number(b):
        if op == "/":
            return (FLOAT if ANY not in (a, b) else ANY), None
        return _number_result(a, b), None
    elif ANY in (a, b) and (is_number(a) or is_number(b) or (op in "+*" and LIST in (a, b))):
        return ANY, None
    return ANY, f"operator {op!r} cannot combine {describe(a)} and {describe(b)}"


def compare_error(op: str, a: str, b: str) -> str | None:
    """Why ``a op b`` cannot be compared, or None."""
    if op in ("==", "!=") or ANY in (a, b):
        return None
    if (is_number(a) and is_number(b)) or (a == b and a in (STR, LIST)):
        return None
    return f"{op!r} cannot order {describe(a)} against {describe(b)}"
