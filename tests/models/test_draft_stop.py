"""When a round stops drafting: each draft's price (stop_thresholds) and the look-ahead (worth_drafting)."""

import itertools

import pytest
import torch
from tiny_models import perturbed_copy

from specdec.config import SamplingConfig, Settings
from specdec.core.cached_model import CachedModel
from specdec.core.drafters import ModelDrafter, stop_thresholds, worth_drafting
from specdec.core.records import STOP_CONFIDENCE
from specdec.core.rounds import speculative_rounds
from specdec.views.draft_length import why_drafting_stopped


def test_without_costs_the_first_draft_is_free_and_the_rest_pay_the_floor():
    assert stop_thresholds(0.1, (), 4) == [0.0, 0.1, 0.1, 0.1]
    assert stop_thresholds(0.0, (1.0,), 3) == [0.0, 0.0, 0.0]  # floor 0: never stop early


def test_each_draft_pays_what_it_adds_to_the_pass():
    # A pass over 2 tokens costs 1.5 plain steps, over 3 1.55, then unmeasured (priced as the last).
    assert stop_thresholds(0.1, (1.0, 1.5, 1.55), 4) == pytest.approx([0.5, 0.15, 0.1, 0.1])
    # Dearer from 4 tokens: the third draft carries the jump.
    assert stop_thresholds(0.1, (1.0, 1.05, 1.1, 1.5, 1.55), 4) == pytest.approx([0.05, 0.15, 0.5, 0.15])


def test_with_equal_prices_drafting_goes_on_exactly_while_the_chance_beats_the_price():
    grid = [i / 20 for i in range(21)]
    for confidence, chance, price in itertools.product(grid, grid, [0.0, 0.1, 0.3]):
        if chance >= confidence or confidence == 0:  # chance is a factor of confidence
            assert worth_drafting(confidence, chance, [price] * 4) == (confidence >= price)


def test_a_sure_draft_goes_past_a_price_paid_once():
    dear_then_level = [0.5, 0.15, 0.15, 0.15]
    # 0.45 < 0.5, but three more drafts each surviving with chance 0.9 pay the jump back.
    assert worth_drafting(0.45, 0.9, dear_then_level)
    assert not worth_drafting(0.45, 0.9, dear_then_level[:1])  # no further draft allowed: it does not pay
    assert not worth_drafting(0.45, 0.3, dear_then_level)  # the drafts after it are too unsure
    assert worth_drafting(0.5, 0.0, dear_then_level)  # pays for itself
    assert worth_drafting(0.2, 0.2, [])  # no prices: no stop


@pytest.mark.parametrize(("pass_costs", "words"), [
    ((1.0, 10.0), ["9.00 for what it adds to the target's pass",
                   "nothing was drafted: this round is a plain step"]),
    ((), ["(the drafting step)", "so the drafter stopped after"]),
], ids=["too dear to draft", "passes free"])
def test_the_round_view_says_which_price_stopped_the_draft(tiny_target, tokenizer, pass_costs, words):
    vocab = len(tokenizer)
    settings = Settings(4, SamplingConfig(temperature=0), 30, adaptive=True, draft_threshold=0.6)
    target = CachedModel(tiny_target, vocab, pass_costs=pass_costs)
    drafter = ModelDrafter(perturbed_copy(tiny_target, scale=0.6, seed=7), vocab)
    traces = list(speculative_rounds(target, drafter, [5, 17, 42, 8], settings, torch.Generator()))
    stopped = [t for t in traces if t.draft_stop == STOP_CONFIDENCE]
    assert stopped
    for trace in stopped:
        why = why_drafting_stopped(trace, settings)
        assert f"**{trace.stop_threshold:.2f}**" in why and all(w in why for w in words), why
