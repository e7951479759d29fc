"""Each rule's exact law from p and q (core.output_law, measure.exact): the four built-in rules' preset
expressions against their own functions, a student's rules worked by hand, sampled laws against the
exact ones, and the tiny pair's trial beside its exact TV."""

import pytest
import torch
from rule_laws import CASES, P, Q, first_token_law, goodness_of_fit, sampled_first_tokens, tv

from specdec.config import RULE_NAMES, SPECULATIVE, TOP_CHOICE, SamplingConfig, Settings
from specdec.core.acceptance import RULES
from specdec.core.output_law import REPLACEMENTS, output_law
from specdec.measure.exact import (
    YOURS,
    CustomRule,
    Position,
    best_position,
    exact_laws,
    expected_noise_floor,
    law_of,
    lossless_everywhere,
    positions,
    sampled_rule,
    samples_to_see,
    unseen,
)
from specdec.measure.rule_expression import PRESETS
from specdec.measure.rules import rule_trial, trial_results


def at(p: torch.Tensor, q: torch.Tensor) -> Position:
    return Position(0, (), p.double(), q.double(), True, False)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", RULE_NAMES)
def test_each_preset_expression_gives_its_rules_own_law(name, case):
    target_probs, draft_probs = CASES[case]
    exact = exact_laws(at(target_probs, draft_probs))[name]
    own = first_token_law(RULES[name], target_probs, draft_probs)  # enumerating the rule's own verdicts
    assert torch.allclose(exact.law, own, atol=1e-12), PRESETS[name]
    assert exact.tv == pytest.approx(tv(own, target_probs), abs=1e-12)
    expected = RULES[name].expected(draft_probs[None], target_probs[None])[0]
    assert exact.acceptance == pytest.approx(float(expected))


def test_p_greater_than_q_with_the_residual_is_lossy_by_a_tenth():
    # Kept: x = 0, 1 (q = 0.1, 0.2); the other 0.7 goes to norm(max(0, p − q)) = [5/6, 1/6, 0, 0].
    law = law_of(at(P, Q), CustomRule.of("p > q", "residual").expression, "residual")
    by_hand = torch.tensor([0.1 + 0.7 * 5 / 6, 0.2 + 0.7 / 6, 0, 0], dtype=torch.float64)
    assert torch.allclose(law.law, by_hand)
    assert law.tv == pytest.approx(0.1) and law.acceptance == pytest.approx(0.3)
    assert not lossless_everywhere(CustomRule.of("p > q", "residual"))


def test_the_ratio_with_the_residual_is_exact_to_float_precision():
    rule = CustomRule.of("min(1, p/q)", "residual")
    generator = torch.Generator().manual_seed(7)
    wide = [(w := torch.rand(1000, generator=generator, dtype=torch.float64) ** 4) / w.sum()
            for _ in range(2)]
    for p, q in [*CASES.values(), wide]:
        assert law_of(at(p, q), rule.expression, "residual").tv < 1e-12
    assert lossless_everywhere(rule)
    assert lossless_everywhere(CustomRule.of("p", "target-other"))  # sample and compare, typed in
    assert not lossless_everywhere(CustomRule.of("p/q", "target"))  # the ratio, but the wrong replacement


def test_a_zero_residual_falls_back_to_p():
    # Draft = target: the residual is all zeros. min(1, p/q) never rejects there; a rule that always
    # rejects gets p, as the sampler does (core.acceptance.residual_distribution).
    same = at(P, P.clone())
    assert exact_laws(same)[SPECULATIVE].acceptance == pytest.approx(1.0)
    law = law_of(same, CustomRule.of("p > q", "residual").expression, "residual")
    assert law.acceptance == 0 and torch.allclose(law.law, P) and not torch.isnan(law.law).any()


@pytest.mark.parametrize("on_reject", REPLACEMENTS)
def test_every_replacement_gives_a_distribution(on_reject):
    p, q = CASES["random"]
    accept = torch.tensor([0.3, 1.0, 0.0, 0.5, 0.2, 0.9], dtype=torch.float64)
    law = output_law(p, q, accept, on_reject)
    assert float(law.sum()) == pytest.approx(1.0) and bool((law >= 0).all())


@pytest.mark.slow  # 4,000 sampled rounds each, ~3 s; the exact laws of these rules are tested above
@pytest.mark.parametrize("text, on_reject", [("p > q", "residual"), ("sqrt(p/q)", "draft"),
                                             ("p/(p+q)", "target-other")])
def test_a_sampled_student_rule_emits_its_exact_law(text, on_reject):
    custom = CustomRule.of(text, on_reject)
    counts = sampled_first_tokens(sampled_rule(custom), P.float(), Q.float())
    assert goodness_of_fit(counts, law_of(at(P, Q), custom.expression, on_reject).law) > 1e-3


def test_greedy_and_no_draft_positions_emit_the_target():
    greedy = Position(0, (), P, Q, True, True)
    assert all(law.tv == 0 and float(law.law[0]) == 1.0 for law in exact_laws(greedy).values())
    nothing = Position(0, (), P, None, False, False)
    assert all(law.tv == 0 and law.acceptance == 0 for law in exact_laws(nothing).values())


def test_what_samples_can_see():
    # A fair coin, 100 draws: E[TV] = sqrt(2·0.25/100)·sqrt(2/π) ≈ 0.056 (test_rules_statistical).
    floor = expected_noise_floor(torch.tensor([0.5, 0.5]), 100)
    assert floor == pytest.approx((0.5 / 100) ** 0.5 * (2 / torch.pi) ** 0.5, rel=1e-6)
    assert samples_to_see(0.0, floor, 100) is None
    assert samples_to_see(floor / 2, floor, 100) == 1600  # a quarter of the TV needs 16 times the samples
    # The top choice here: q(argmax) = 0.1 of p(argmax) = 0.6 -> TV 0.04, small beside a 150-sample floor.
    law = exact_laws(at(P, Q))[TOP_CHOICE]
    words = unseen(TOP_CHOICE, at(P, Q), law, 0.05, 150, lambda token: f"t{token}")
    assert "the draft gives the target's top token 't0' q = 0.100" in words and "TV here is 0.040," in words


@pytest.mark.slow  # 300 sampled runs of every rule and the target on the tiny pair, ~7 s
def test_the_tiny_pairs_sampled_tv_is_its_exact_tv_within_the_noise(close_pair):
    settings = Settings(gamma=3, sampling=SamplingConfig(2.0, 5, 1.0))
    prompt_ids = close_pair.encode_prompt("The quick brown", False, 8)
    custom = CustomRule.of("p > q", "residual")
    trial = list(rule_trial(close_pair, prompt_ids, settings, num_samples=300, custom=custom))[-1]
    results = {r.rule: r for r in trial_results(trial)}
    assert set(results) == {*RULE_NAMES, YOURS}
    for r in results.values():
        # |TV(sampled rule, sampled target) − TV(rule, target)| ≤ the two samples' own distances
        assert abs(r.tv - r.tv_exact) < 2 * r.tv_noise_floor + 0.02, r.rule
        assert r.first_expected == pytest.approx(r.acceptance_exact, abs=1e-5) or r.rule == YOURS
        assert (r.tv_exact < 1e-9) == r.lossless, r.rule
    # The scan's first position is the trial's: the same p and q.
    first = next(positions(close_pair, prompt_ids, settings, count=1))
    assert torch.allclose(first.target_probs, trial.first.target_probs, atol=1e-5)
    assert torch.allclose(first.draft_probs, trial.first.draft_probs, atol=1e-5)


def test_best_position_is_where_the_rule_loses_most(close_pair):
    settings = Settings(gamma=3, sampling=SamplingConfig(1.0, 5, 1.0))
    found = list(positions(close_pair, close_pair.encode_prompt("Once upon", False, 8), settings, count=8))
    assert [p.index for p in found] == list(range(len(found))) and len(found) >= 2
    assert all(b.context[: len(a.context)] == a.context for a, b in zip(found, found[1:], strict=False))
    best, top_tv = best_position(found, TOP_CHOICE)
    assert top_tv == max(exact_laws(p)[TOP_CHOICE].tv for p in found)
    assert exact_laws(best)[TOP_CHOICE].tv == top_tv


def test_positions_are_read_as_auto_or_a_number():
    from specdec.errors import SpecDecError
    from specdec.measure.exact import MAX_POSITION, parse_position

    assert parse_position(None) == 0 and parse_position("auto") == "auto" and parse_position("7") == 7
    for bad in ("-1", str(MAX_POSITION + 1), "later", "1.5"):
        with pytest.raises(SpecDecError, match="position must be auto or a token number"):
            parse_position(bad)
