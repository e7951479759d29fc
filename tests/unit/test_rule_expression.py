"""A student's rule as an expression: the safe evaluator's whitelist, each refusal one clear line,
and what the allowed expressions evaluate to (no model)."""

import pytest
import torch

from specdec.errors import SpecDecError
from specdec.measure.exact import CustomRule
from specdec.measure.rule_expression import MAX_CHARS, RuleExpressionError, parse_rule

P = torch.tensor([0.6, 0.3, 0.05, 0.05], dtype=torch.float64)
Q = torch.tensor([0.1, 0.2, 0.4, 0.3], dtype=torch.float64)


def accept(text: str) -> list[float]:
    return parse_rule(text).accept_probs(P, Q, P.max(), torch.tensor(1.0)).tolist()


@pytest.mark.parametrize("text, expected", [
    ("min(1, p/q)", [1.0, 1.0, 0.125, 0.05 / 0.3]),
    ("p > q", [1.0, 1.0, 0.0, 0.0]),
    ("p/(p+q)", [6 / 7, 0.6, 0.05 / 0.45, 0.05 / 0.35]),
    ("sqrt(p/q)", [1.0, 1.0, 0.125**0.5, (0.05 / 0.3) ** 0.5]),
    ("1", [1.0] * 4),
    ("p/q", [1.0, 1.0, 0.125, 0.05 / 0.3]),  # no min: clamped to [0, 1] all the same
    ("(p/q)**2", [1.0, 1.0, 0.125**2, (0.05 / 0.3) ** 2]),
    ("p == pmax", [1.0, 0.0, 0.0, 0.0]),
    ("0.1 < p <= 0.3", [0.0, 1.0, 0.0, 0.0]),
    ("max(p, q, 0.35) - abs(-0.05) + 0*exp(H) + 0*log(q)", [0.55, 0.3, 0.35, 0.30]),
    ("-p", [0.0] * 4),
])
def test_allowed_expressions_evaluate_over_the_vocabulary_clamped(text, expected):
    assert accept(text) == pytest.approx(expected)


@pytest.mark.parametrize("text, words", [
    ("__import__('os')", "'__import__' cannot be called"),
    ("p.real", "an attribute"),
    ("q.__class__", "an attribute"),
    ("p[0]", "a subscript"),
    ("(lambda: 1)()", "cannot be called"),
    ("lambda: 1", "a lambda"),
    ("[x for x in p]", "a comprehension"),
    ("sum(x for x in p)", "'sum' cannot be called"),
    ("9**9**9", "** takes a number from -16 to 16 as its exponent, not 3.8742e+08"),
    ("p**q", "not an expression in p or q"),
    ("p" * 10_000, "has 10,000 characters: at most 200"),
    ("x", "unknown name 'x'"),
    ("os", "unknown name 'os'"),
    ("'p'", "'p' is not a number"),
    ("True", "True is not a number"),
    ("p and q", "and/or"),
    ("p if q else 1", "if/else"),
    ("min()", "min() takes at least one argument"),
    ("sqrt(p, q)", "sqrt() takes one argument"),
    ("min(p, key=q)", "plain arguments only"),
    ("1/0", "divides by zero"),
    ("p/(q - q)", "divides by zero at a token with p = 0.6, q = 0.1"),
    ("min(1, p/q", "cannot be read"),
    ("", "is empty"),
])
def test_refusals_are_one_clear_line(text, words):
    with pytest.raises(RuleExpressionError) as caught:
        accept(text)
    message = str(caught.value)
    assert words in message and "\n" not in message and len(message) < 300
    assert isinstance(caught.value, SpecDecError)  # the CLI and the pages show it as one line


def test_a_value_that_is_no_number_names_the_token():
    with pytest.raises(RuleExpressionError, match=r"gives no number at a token with p = 0.05, q = 0.4"):
        accept("sqrt(p - 0.1)")


def test_the_length_cap_is_on_characters_not_tokens():
    text = "+".join(["p"] * (MAX_CHARS // 2))  # 199 characters: accepted
    assert len(text) <= MAX_CHARS and accept(text) == [1.0] * 4
    with pytest.raises(RuleExpressionError, match="at most 200"):
        parse_rule(text + "+p")


def test_no_python_eval_is_reached(monkeypatch):
    import builtins

    def refuse(*args, **kwargs):
        raise AssertionError("eval was called")

    monkeypatch.setattr(builtins, "eval", refuse)
    monkeypatch.setattr(builtins, "exec", refuse)
    assert accept("min(1, p/q)")[0] == 1.0


def test_an_unknown_replacement_is_one_line():
    with pytest.raises(SpecDecError, match="on-reject must be one of residual, target, draft"):
        CustomRule.of("p > q", "argmax")
