"""When a round stops drafting: each draft's price (stop_thresholds) and the look-ahead (worth_drafting)."""

import itertools

import pytest

from specdec.core.drafters import stop_thresholds, worth_drafting


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
