"""Each acceptance rule's words live beside its function (core.acceptance.RULES) and the pages read
them from there: the round view's test lines switch on the round's rule, and no page keeps a copy."""

import re
from dataclasses import replace
from pathlib import Path

import pytest

from app_pages.round_stages import _test_line
from specdec.config import RULE_NAMES, SAMPLE_COMPARE, SPECULATIVE, TOP_CHOICE, TYPICAL
from specdec.core.acceptance import RULES, TYPICAL_DELTA, TYPICAL_EPSILON
from specdec.core.output_law import REPLACEMENT_WORDS, REPLACEMENTS
from specdec.core.records import RoundTrace, ShownDistribution
from specdec.measure.exact import CustomRule, sampled_rule

ROOT = Path(__file__).resolve().parents[2]
LABELS = {1: "the", 2: "cat", 3: "sat", 4: "dog"}


def _trace(**changes) -> RoundTrace:
    shown = ShownDistribution(token_ids=[4, 2, 3, 1], target_probs=[0.5, 0.3, 0.15, 0.05],
                              draft_probs=[0.1, 0.6, 0.2, 0.1], residual_probs=None)
    trace = RoundTrace(
        index=0, context_length=10, drafted_tokens=[1, 2, 3], positions=[shown] * 4,
        draft_token_probs=[0.1, 0.6, 0.2], target_token_probs=[0.5, 0.3, 0.15],
        accept_probs=[1.0, 0.5, 0.75], uniforms=[0.05, 0.9, 0.3], num_accepted=1, next_token=1,
        is_bonus=False, emitted_tokens=[1, 1], draft_seconds=0.01, verify_seconds=0.02,
    )
    return replace(trace, **changes)


@pytest.mark.parametrize("name", RULE_NAMES)
def test_every_rule_carries_its_words(name):
    rule = RULES[name]
    assert rule.title and rule.test_words and rule.replacement_name
    assert "{nxt}" in rule.replaced_by  # the round view puts the drawn token there
    assert rule.menu_title.endswith("(exact)" if rule.lossless else "(lossy)")


def test_medusas_constants_are_read_not_copied():
    words = f"min({TYPICAL_EPSILON}, {TYPICAL_DELTA}·exp(−H(p)))"
    assert words in RULES[TYPICAL].test_words and words in RULES[TYPICAL].test
    # No page, view or measurement writes the figures again: each reads core.acceptance's constants.
    for path in [*ROOT.glob("app_pages/*.py"), *ROOT.glob("specdec/**/*.py")]:
        if path.name == "acceptance.py":
            continue
        assert not re.search(r"min\(0\.09|0\.3\s*[·*]\s*exp", path.read_text()), path


def test_no_page_keeps_a_copy_of_a_rules_words():
    pages = "".join(path.read_text() for path in ROOT.glob("app_pages/*.py"))
    for rule in RULES.values():
        for words in (rule.test_words, rule.menu_title, rule.replacement_name, rule.replaced_by[:40]):
            assert words not in pages, words
    for words in REPLACEMENT_WORDS.values():
        assert f'"{words}"' not in pages, words


def test_the_test_line_switches_on_the_rounds_rule():
    # The same trace carries thresholds and draws; only the round's rule says which test it faced.
    trace = _trace(thresholds=[0.2, 0.4, 0.05], target_draws=[1, 4, 2])
    assert "threshold 0.200" in _test_line(replace(trace, rule=TYPICAL), LABELS, 0, greedy=False)
    assert "the target drew y" in _test_line(replace(trace, rule=SAMPLE_COMPARE), LABELS, 1, greedy=False)
    assert "u=0.050 < ratio" in _test_line(replace(trace, rule=SPECULATIVE), LABELS, 0, greedy=False)
    top = _test_line(replace(trace, rule=TOP_CHOICE), LABELS, 1, greedy=False)
    assert "differs from the target's argmax" in top and "dog" in top
    # Greedy mode reports the sidebar's rule, but every rule is the argmax test there.
    greedy = _test_line(replace(trace, rule=TYPICAL, uniforms=None), LABELS, 0, greedy=True)
    assert "matches the target's argmax" in greedy and "threshold" not in greedy


@pytest.mark.parametrize("on_reject", REPLACEMENTS)
def test_a_students_rule_has_the_same_shape(on_reject):
    rule = sampled_rule(CustomRule.of("p > q", on_reject))
    assert "p > q" in rule.test_words and rule.replacement_name == REPLACEMENT_WORDS[on_reject]
    assert rule.replaced_by.format(nxt="`cat`").endswith(REPLACEMENT_WORDS[on_reject])
