"""An asset gate's `auto_approve` rule: a small, safe expression over the materialization's evidence.

`compile_rule("accuracy >= 0.92 and cost_usd < 50")` parses it once, when the definitions load, and refuses
anything but names of evidence fields, numbers, strings, True/False/None, comparisons (chained too),
`and`/`or`/`not`, `+ - * /` and parentheses. Python's `ast` parses; this module walks the tree itself and never
calls `eval`, so a hostile expression (a call, an attribute, a dunder name, a subscript, a lambda) is refused
at load with the token that broke it, and nothing in an expression can reach the interpreter.

Evaluating fails closed: a field the materialization did not record, or a non-number where a number is
compared or added, makes the rule answer "no" with a reason naming the field, so a person decides.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

MAX_LENGTH = 1000  # characters; a rule is one line a reviewer reads
MAX_DEPTH = 32  # nesting of the parsed tree; Python's own parser recurses on deeper input

ALLOWED_FORMS = (
    "evidence field names, numbers, 'strings', True/False/None, comparisons (< <= > >= == !=, chained), "
    "and/or/not, + - * /, parentheses"
)

_COMPARE: dict[type[ast.cmpop], tuple[str, Callable[[Any, Any], bool]]] = {
    ast.Lt: ("<", operator.lt),
    ast.LtE: ("<=", operator.le),
    ast.Gt: (">", operator.gt),
    ast.GtE: (">=", operator.ge),
    ast.Eq: ("==", operator.eq),
    ast.NotEq: ("!=", operator.ne),
}
_ARITHMETIC: dict[type[ast.operator], tuple[str, Callable[[float, float], float]]] = {
    ast.Add: ("+", operator.add),
    ast.Sub: ("-", operator.sub),
    ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv),
}
_ORDERED = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


class GateExpressionError(ValueError):
    """The rule cannot be compiled; the message names the offending part and the allowed forms."""


class _Undecided(Exception):
    """Evaluation cannot decide (a missing field, a non-number): the rule fails closed with this reason."""


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _show(value: object) -> str:
    if isinstance(value, float):
        return repr(round(value, 6))
    return repr(value) if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class GateRule:
    """A compiled `auto_approve` expression."""

    text: str
    names: tuple[str, ...]  # the evidence fields it reads, in order of first use
    _tree: ast.expr

    def evaluate(self, evidence: Mapping[str, object]) -> tuple[bool, str]:
        """(approve?, reason): the reason shows the values it compared, e.g. "accuracy 0.95 >= 0.92 and ..."."""
        try:
            value, reason = _evaluate(self._tree, evidence)
        except _Undecided as exc:
            return False, f"auto_approve ({self.text}) cannot decide: {exc}; a person decides"
        if not isinstance(value, bool):
            return False, f"auto_approve ({self.text}) gave {_show(value)}, not true or false; a person decides"
        return value, reason if value else f"{reason} does not hold"


def compile_rule(text: str) -> GateRule:
    """Parse and check `text`; raise `GateExpressionError` naming what is not allowed."""
    if not isinstance(text, str) or not text.strip():
        raise GateExpressionError("auto_approve is empty: write a rule such as 'accuracy >= 0.92'")
    if len(text) > MAX_LENGTH:
        raise GateExpressionError(f"auto_approve is {len(text)} characters; at most {MAX_LENGTH} are allowed")
    if text.count("(") > MAX_DEPTH:
        raise GateExpressionError(f"auto_approve nests more than {MAX_DEPTH} parentheses")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        detail = exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__
        raise GateExpressionError(
            f"auto_approve {text!r} is not an expression ({detail}); allowed: {ALLOWED_FORMS}"
        ) from None
    names: list[str] = []
    _check(tree, text, names, 0)
    return GateRule(text.strip(), tuple(names), tree)


def _refuse(node: ast.AST, text: str, what: str) -> GateExpressionError:
    segment = ast.get_source_segment(text.strip(), node) or type(node).__name__
    return GateExpressionError(f"auto_approve {text!r}: {what} {segment!r} is not allowed; allowed: {ALLOWED_FORMS}")


def _check(node: ast.AST, text: str, names: list[str], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise GateExpressionError(f"auto_approve nests deeper than {MAX_DEPTH} levels")
    match node:
        case ast.Name(id=name):
            if name.startswith("_"):
                raise _refuse(node, text, "a name starting with '_'")
            if name not in names:
                names.append(name)
        case ast.Constant(value=value):
            if not (value is None or isinstance(value, bool | int | float | str)):
                raise _refuse(node, text, "the constant")
        case ast.BoolOp(values=values):
            for v in values:
                _check(v, text, names, depth + 1)
        case ast.UnaryOp(op=ast.Not() | ast.USub() | ast.UAdd(), operand=operand):
            _check(operand, text, names, depth + 1)
        case ast.BinOp(op=op, left=left, right=right) if type(op) in _ARITHMETIC:
            _check(left, text, names, depth + 1)
            _check(right, text, names, depth + 1)
        case ast.Compare(ops=ops, left=left, comparators=comparators) if all(type(o) in _COMPARE for o in ops):
            for v in (left, *comparators):
                _check(v, text, names, depth + 1)
        case ast.Call():
            raise _refuse(node, text, "the call")
        case ast.Attribute():
            raise _refuse(node, text, "the attribute")
        case ast.Subscript():
            raise _refuse(node, text, "the subscript")
        case _:
            raise _refuse(node, text, "the expression")


def _evaluate(node: ast.expr, evidence: Mapping[str, object]) -> tuple[object, str]:
    """(value, how it reads with the values filled in)."""
    match node:
        case ast.Name(id=name):
            if name not in evidence:
                raise _Undecided(f"the materialization has no {name!r} metadata")
            return evidence[name], name
        case ast.Constant(value=value):
            return value, _show(value)
        case ast.BoolOp(op=op, values=values):
            joiner = " and " if isinstance(op, ast.And) else " or "
            parts: list[str] = []
            for v in values:
                value, reason = _evaluate(v, evidence)
                if not isinstance(value, bool):
                    raise _Undecided(f"{reason} is {_show(value)}, not true or false")
                parts.append(reason)
                # Short-circuit like Python, so the reason names what decided it.
                if value is isinstance(op, ast.Or):
                    return value, reason
            return isinstance(op, ast.And), joiner.join(parts)
        case ast.UnaryOp(op=op, operand=operand):
            value, reason = _evaluate(operand, evidence)
            if isinstance(op, ast.Not):
                if not isinstance(value, bool):
                    raise _Undecided(f"{reason} is {_show(value)}, not true or false")
                return not value, f"not {reason}"
            number = _number(value, reason)
            return (
                -number if isinstance(op, ast.USub) else number
            ), f"{'-' if isinstance(op, ast.USub) else '+'}{reason}"
        case ast.BinOp(op=op, left=left, right=right):
            symbol, apply = _ARITHMETIC[type(op)]
            (a, ra), (b, rb) = _evaluate(left, evidence), _evaluate(right, evidence)
            x, y = _number(a, ra), _number(b, rb)
            if isinstance(op, ast.Div) and y == 0:
                raise _Undecided(f"{rb} is 0 in a division")
            return apply(x, y), f"({_with_value(ra, a)} {symbol} {_with_value(rb, b)})"
        case ast.Compare(left=left, ops=ops, comparators=comparators):
            value, reason = _evaluate(left, evidence)
            shown = [_with_value(reason, value)]
            for op, right in zip(ops, comparators, strict=True):
                other, other_reason = _evaluate(right, evidence)
                symbol, apply = _COMPARE[type(op)]
                if isinstance(op, _ORDERED):
                    _number(value, reason)  # an order between non-numbers decides nothing: fail closed
                    _number(other, other_reason)
                shown.append(f"{symbol} {_with_value(other_reason, other)}")
                if not apply(value, other):
                    return False, " ".join(shown)
                value, reason = other, other_reason
            return True, " ".join(shown)
    raise _Undecided(f"{type(node).__name__} cannot be evaluated")  # unreachable after _check


def _with_value(reason: str, value: object) -> str:
    """A field reads as "accuracy 0.95"; a constant or arithmetic as itself."""
    return f"{reason} {_show(value)}" if reason.isidentifier() and reason not in {"True", "False", "None"} else reason


def _number(value: object, reason: str) -> float:
    if not _is_number(value):
        raise _Undecided(f"{reason} is {_show(value)}, not a number")
    return float(value)  # type: ignore[arg-type]
