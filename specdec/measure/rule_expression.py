"""A student's own acceptance rule: an expression in p and q, read by a small safe evaluator.

The expression gives the probability of keeping a drafted token x, from
    p      the target's probability of x        q      the draft's probability of x
    pmax   the target's top probability here    H      the target's entropy here, in nats, as Medusa
                                                       computes it: −Σ p·log(p + 10⁻⁵)
with numbers, + − * / and ** (a number from −16 to 16 as exponent), comparisons (true = 1, false = 0),
min, max, sqrt, exp, log, abs and brackets. The result is clamped to [0, 1]. Examples: `min(1, p/q)`,
`p > q`, `p/(p+q)`, `sqrt(p/q)`, `1`. pmax and H are there so the four built-in rules are expressions
too (`PRESETS`; a test checks each against the rule's own function).

Nothing is run but this: the text is parsed with `ast` and every node is checked against a whitelist
before anything is evaluated (never Python's `eval`: a class server is shared). Any other name, an
attribute, a subscript, a lambda, a comprehension, a call of anything else, a string: refused, with
one line saying why. At most `MAX_CHARS` characters.

Evaluation is vectorised over the tokens the draft can propose (q > 0; no other x is ever drafted,
so p/q is defined wherever it is used). A division by zero there, or a value that is no number
(sqrt of a negative, ∞ − ∞), is an error with the token's p and q in its one line, not a guess.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass

import torch

from specdec.config import SAMPLE_COMPARE, SPECULATIVE, TOP_CHOICE, TYPICAL
from specdec.core.acceptance import TYPICAL_DELTA, TYPICAL_EPSILON
from specdec.core.output_law import REPLACEMENTS, RESIDUAL, TARGET, TARGET_OTHER, TYPICAL_CUT
from specdec.errors import SpecDecError

MAX_CHARS = 200
MAX_EXPONENT = 16
NAMES = ("p", "q", "pmax", "H")
# Elementwise functions of one argument; min and max (None) take any number of arguments.
FUNCTIONS = {"min": None, "max": None, "sqrt": torch.sqrt, "exp": torch.exp, "log": torch.log,
             "abs": torch.abs}
# The four built-in rules as (expression, replacement): their exact laws come from these (measure.exact).
PRESETS = {
    SPECULATIVE: ("min(1, p/q)", RESIDUAL),
    TOP_CHOICE: ("p == pmax", TARGET),  # x is the argmax (a tie would keep both; argmax takes the first)
    SAMPLE_COMPARE: ("p", TARGET_OTHER),  # y ~ p equals x with probability p(x); else y, which is not x
    TYPICAL: (f"p > min({TYPICAL_EPSILON}, {TYPICAL_DELTA}*exp(-H))", TYPICAL_CUT),
}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.Pow: operator.pow}
_COMPARE = {ast.Gt: torch.gt, ast.GtE: torch.ge, ast.Lt: torch.lt, ast.LtE: torch.le, ast.Eq: torch.eq,
            ast.NotEq: torch.ne}
_ALLOWED = "numbers, p, q, pmax, H, + - * / **, comparisons, min, max, sqrt, exp, log, abs"


class RuleExpressionError(SpecDecError):
    """A rule expression that cannot be read or evaluated, in one line."""


def _refuse(why: str) -> RuleExpressionError:
    return RuleExpressionError(f"rule expression: {why} (allowed: {_ALLOWED})")


def _describe(node: ast.AST) -> str:
    kinds = {ast.Attribute: "an attribute (.)", ast.Subscript: "a subscript ([ ])", ast.Lambda: "a lambda",
             ast.ListComp: "a comprehension", ast.GeneratorExp: "a comprehension", ast.SetComp:
             "a comprehension", ast.DictComp: "a comprehension", ast.BoolOp: "and/or (use min or max)",
             ast.IfExp: "if/else", ast.NamedExpr: "an assignment (:=)"}
    return kinds.get(type(node), f"{type(node).__name__.lower()} syntax")


def _check(node: ast.AST) -> None:
    """Every node on the whitelist, or one line saying what is not."""
    if isinstance(node, ast.Expression):
        return _check(node.body)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise _refuse(f"{node.value!r} is not a number")
        return None
    if isinstance(node, ast.Name):
        if node.id not in NAMES:
            raise _refuse(f"unknown name {node.id!r}")
        return None
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _check(node.left) or _check(node.right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        return _check(node.operand)
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        for part in (node.left, *node.comparators):
            _check(part)
        return None
    if isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in FUNCTIONS:
            called = name or _describe(node.func)
            raise _refuse(f"{called!r} cannot be called: only min, max, sqrt, exp, log, abs")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise _refuse(f"{name}() takes plain arguments only")
        wanted = "at least one argument" if FUNCTIONS[name] is None else "one argument"
        if not node.args or (FUNCTIONS[name] is not None and len(node.args) != 1):
            raise _refuse(f"{name}() takes {wanted}")
        for argument in node.args:
            _check(argument)
        return None
    raise _refuse(f"{_describe(node)} is not allowed")


@dataclass(frozen=True)
class RuleExpression:
    """A checked expression: `accept_probs` evaluates it (see the module's docstring)."""

    text: str
    tree: ast.Expression

    def accept_probs(self, target_probs: torch.Tensor, draft_probs: torch.Tensor, top: torch.Tensor,
                     entropy: torch.Tensor) -> torch.Tensor:
        """a(x) for x's with these p(x), q(x) (any shape; the position's pmax and H broadcast) -> [0, 1]."""
        names = {"p": target_probs.double(), "q": draft_probs.double(), "pmax": top.double(),
                 "H": entropy.double()}
        value = _evaluate(self.tree.body, names)
        value = value.expand(torch.broadcast_shapes(value.shape, target_probs.shape))
        bad = torch.isnan(value)
        if bad.any():
            at = int(bad.flatten().nonzero()[0])
            raise RuleExpressionError(
                f"rule expression {self.text!r} gives no number at a token with p = "
                f"{float(target_probs.flatten()[at]):.3g}, q = {float(draft_probs.flatten()[at]):.3g} "
                "(a square root or log of a negative number, or ∞ − ∞)")
        return value.clamp(0.0, 1.0)


def _divide(numerator: torch.Tensor, denominator: torch.Tensor, names: dict) -> torch.Tensor:
    zero = denominator == 0
    if zero.any():
        where = ""
        if zero.dim():  # which token: the first where it happens
            at = int(zero.flatten().nonzero()[0])
            p, q = (names[n].expand(zero.shape).flatten()[at] for n in ("p", "q"))
            where = f" at a token with p = {float(p):.3g}, q = {float(q):.3g}"
        raise RuleExpressionError(f"rule expression divides by zero{where}")
    return numerator / denominator


def _constant(node: ast.AST) -> bool:
    return not any(isinstance(n, ast.Name) for n in ast.walk(node))


def _evaluate(node: ast.AST, names: dict) -> torch.Tensor:
    """The value of a checked node, a float64 tensor (0-dim where it does not depend on p or q)."""
    if isinstance(node, ast.Constant):
        return torch.tensor(float(node.value), dtype=torch.float64)
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.UnaryOp):
        value = _evaluate(node.operand, names)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, names), _evaluate(node.right, names)
        if isinstance(node.op, ast.Div):
            return _divide(left, right, names)
        small = _constant(node.right) and abs(float(right)) <= MAX_EXPONENT
        if isinstance(node.op, ast.Pow) and not small:
            shown = f"{float(right):g}" if _constant(node.right) else "an expression in p or q"
            raise RuleExpressionError(f"rule expression: ** takes a number from -{MAX_EXPONENT} to "
                                      f"{MAX_EXPONENT} as its exponent, not {shown}")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.Compare):
        values = [_evaluate(part, names) for part in (node.left, *node.comparators)]
        result = torch.tensor(1.0, dtype=torch.float64)
        for op, a, b in zip(node.ops, values, values[1:], strict=False):  # a < b < c: both must hold
            result = result * _COMPARE[type(op)](a, b).double()
        return result
    # A call: one elementwise function, or min/max over its arguments.
    args = [_evaluate(a, names) for a in node.args]
    name = node.func.id
    if FUNCTIONS[name] is not None:
        return FUNCTIONS[name](args[0])
    shape = torch.broadcast_shapes(*(a.shape for a in args))
    stacked = torch.stack([a.expand(shape) for a in args])
    return stacked.amin(dim=0) if name == "min" else stacked.amax(dim=0)


def parse_rule(text: str) -> RuleExpression:
    """Check a student's expression, or raise RuleExpressionError with one line."""
    text = (text or "").strip()
    if not text:
        raise RuleExpressionError("rule expression is empty: type one in p and q, e.g. min(1, p/q)")
    if len(text) > MAX_CHARS:
        raise RuleExpressionError(f"rule expression has {len(text):,} characters: at most {MAX_CHARS}")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        why = getattr(error, "msg", None) or type(error).__name__
        raise RuleExpressionError(f"rule expression {text!r} cannot be read: {why}") from None
    _check(tree)
    expression = RuleExpression(text, tree)
    # A constant part that divides by zero, or a bad exponent, is found now, not at the first position.
    probe = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    try:
        expression.accept_probs(probe, probe.flip(0), probe.max(), torch.tensor(1.0))
    except RuleExpressionError as error:
        if " at a token" not in str(error):
            raise
    return expression


def check_replacement(on_reject: str) -> str:
    if on_reject not in REPLACEMENTS:
        raise SpecDecError(f"on-reject must be one of {', '.join(REPLACEMENTS)}, got {on_reject!r}")
    return on_reject

