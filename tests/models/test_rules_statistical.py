"""The rules sampled: each emits what its exact law says; the lossless ones match the target, the
lossy ones are caught. Toy distributions first, then the tiny pair through the whole round loop.

Seeds are fixed, so every test is deterministic; thresholds as in test_acceptance_statistical.
"""

from collections import Counter
from dataclasses import replace

import pytest
from rule_laws import P, Q, first_token_law, goodness_of_fit, sampled_first_tokens

from specdec.config import (
    RULE_NAMES,
    SAMPLE_COMPARE,
    SPECULATIVE,
    TOP_CHOICE,
    TYPICAL,
    SamplingConfig,
    Settings,
)
from specdec.core.acceptance import RULES
from specdec.measure.rules import rule_trial, trial_results
from specdec.measure.stats import tv_noise_floor
from specdec.models.runs import generate

P_VALUE_FLOOR = 1e-3
LOSSLESS, LOSSY = (SPECULATIVE, SAMPLE_COMPARE), (TOP_CHOICE, TYPICAL)


@pytest.mark.slow  # 4,000 sampled rounds a rule, ~2 s each; test_exact_laws enumerates each rule's law
@pytest.mark.parametrize("name", RULE_NAMES)
def test_each_rule_emits_its_own_exact_law(name):
    rule = RULES[name]
    counts = sampled_first_tokens(rule, P.float(), Q.float())
    assert goodness_of_fit(counts, first_token_law(rule, P, Q)) > P_VALUE_FLOOR
    if name in LOSSY:  # and that law is not p: the same test catches them against the target
        assert goodness_of_fit(counts, P) < P_VALUE_FLOOR
    else:
        assert goodness_of_fit(counts, P) > P_VALUE_FLOOR


@pytest.mark.slow  # 300 sampled runs of every rule and of the target on the tiny pair, ~7 s
def test_the_trial_catches_the_lossy_rules_with_the_tiny_pair(close_pair):
    # At T = 2 with top-k 5 this prompt's first token has a moderate argmax the draft often proposes.
    settings = Settings(gamma=3, sampling=SamplingConfig(2.0, 5, 1.0))
    prompt_ids = close_pair.encode_prompt("The quick brown", False, 8)
    trial = list(rule_trial(close_pair, prompt_ids, settings, num_samples=300))[-1]
    results = {r.rule: r for r in trial_results(trial)}
    assert set(results) == set(RULE_NAMES) and all(r.samples == 300 for r in results.values())
    for name in LOSSLESS:
        assert results[name].chi2_p > P_VALUE_FLOOR, name
    for name in LOSSY:
        assert results[name].chi2_p < P_VALUE_FLOOR, name
        assert results[name].tv > 2 * results[name].tv_noise_floor, name
    for r in results.values():  # the first draft is kept as often as p and q say (4 standard errors)
        spread = 4 * (r.first_expected * (1 - r.first_expected) / r.samples) ** 0.5 + 0.01
        assert abs(r.first_acceptance - r.first_expected) < spread, r.rule
    # The ratio rule keeps more than sample-and-compare: Σ min(p, q) >= Σ p·q.
    assert results[SPECULATIVE].first_expected > results[SAMPLE_COMPARE].first_expected


@pytest.mark.parametrize("name", RULE_NAMES)
def test_at_temperature_zero_every_rule_is_plain_greedy(close_pair, name):
    prompt_ids = close_pair.encode_prompt("The quick brown", False, 16)
    settings = Settings(gamma=3, sampling=SamplingConfig(0.0), max_new_tokens=16, rule=name)
    speculative = generate(close_pair, prompt_ids, settings, detail=False)
    plain = generate(close_pair, prompt_ids, replace(settings, rule=SPECULATIVE), speculative=False)
    assert speculative.token_ids == plain.token_ids
    assert all(r.rule == name for r in speculative.rounds)


def test_the_noise_floor_is_what_two_samples_of_one_distribution_differ_by():
    # A fair coin, 100 tosses twice: E[TV] = E|share of heads a − b| = sqrt(2·0.25/100)·sqrt(2/π) ≈ 0.056.
    halves = Counter(heads=50, tails=50), Counter(heads=47, tails=53)
    floor = tv_noise_floor(*halves)
    assert floor == tv_noise_floor(*halves)  # its own seed: the same counts, the same floor
    assert 0.045 < floor < 0.07
    # Two samples that share nothing are far apart (TV 1), but re-split they look alike.
    assert tv_noise_floor(Counter(a=60), Counter(b=60)) < 0.15
