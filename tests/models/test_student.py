"""Predict-then-reveal and the KV-cache strip, on hand-made rounds and on real caches (tiny models)."""

import pytest
import torch
from hand_traces import trace as hand_trace
from tiny_models import perturbed_copy

from specdec.config import Settings
from specdec.core.cached_model import CachedModel
from specdec.core.drafters import ModelDrafter, NgramDrafter
from specdec.core.records import STOP_CONFIDENCE
from specdec.core.rounds import speculative_rounds
from specdec.views import kvcache
from specdec.views.quiz import COUNT, TICK, Score, judge, survival_probabilities
from specdec.views.tokens import prose_and_code

PROMPT = [5, 17, 42, 8, 99, 3]


def test_reasons_come_from_the_rounds_numbers():
    # Draft 1: p 0.5 >= q 0.1, kept; draft 2: ratio 0.5, u 0.9, rejected; draft 3: never tested.
    rejected = hand_trace(uniforms=(0.05, 0.9, 0.3), num_accepted=1)
    answer = judge(rejected, predicted_kept=[True, True, False])
    reasons = [m.reason for m in answer.marks]
    assert reasons[0] == "kept once reached: p(x)=0.50 ≥ q(x)=0.10, so its test always passes"
    assert reasons[1] == ("rejected: the uniform draw u=0.90 ≥ p/q=0.50 (kept with probability 0.50, "
                          "not this time)")
    assert reasons[2].startswith("never tested: draft 2 was rejected first")
    assert [m.right for m in answer.marks] == [True, False, True] and answer.drafts_right == 2
    assert not answer.right and answer.kept_count == 1
    # A coin that came up "keep": draft 2 kept with u = 0.3 < 0.5.
    lucky = hand_trace(uniforms=(0.05, 0.3, 0.9), num_accepted=2)
    assert judge(lucky, [True, True, True]).marks[1].reason == (
        "a coin flip: kept with probability 0.50, and this time it was (the uniform draw u=0.30 < 0.50)")


def test_survival_probability_multiplies_the_acceptances_before_it():
    assert survival_probabilities(hand_trace()) == pytest.approx([1.0, 0.5, 0.375])


def test_greedy_rounds_are_judged_by_the_argmax_rule():
    greedy = hand_trace(uniforms=None, num_accepted=1)
    marks = judge(greedy, [True, False, False], target_top=["a", "cat", "dog"]).marks
    assert marks[0].reason.startswith("kept: it is the target's most likely token")
    assert marks[1].reason == "rejected: the target's most likely token (cat) is another one"


def test_count_answers_and_the_score():
    score = Score()
    score.add(judge(hand_trace(num_accepted=1), predicted_count=1))
    score.add(judge(hand_trace(num_accepted=1), predicted_kept=[True, False, False]))
    score.add(judge(hand_trace(num_accepted=1), predicted_kept=[False, False, True]))
    assert score.rounds_answered == 3 and score.rounds_right == 2
    assert score.drafts_judged == 6 and score.drafts_right == 3 + 1
    calibration = score.calibration(bins=2)
    assert sum(row["drafts"] for row in calibration) == 6
    high = calibration[-1]  # drafts 1 (probability 1.0) and 2 (0.5): said kept 1 of 4
    assert high["true_probability"] == pytest.approx(0.75) and high["said_kept"] == pytest.approx(0.25)
    assert score.count_guesses() == [{"expected": pytest.approx(1.875), "said": 1, "kept": 1}]
    assert judge(hand_trace(), predicted_count=2).question == COUNT
    assert judge(hand_trace(), predicted_kept=[True] * 3).question == TICK
    with pytest.raises(ValueError, match="one answer per draft"):
        judge(hand_trace(), predicted_kept=[True])


def rounds_with_real_caches(target_model, draft_model, vocab, seed, max_new_tokens=40, **adaptive):
    """(trace, target cache length, draft cache length) after each round, read from the caches."""
    target = CachedModel(target_model, vocab)
    drafter = ModelDrafter(draft_model, vocab)
    generator = torch.Generator().manual_seed(seed)
    settings = Settings(4, max_new_tokens=max_new_tokens, **({"adaptive": False} | adaptive))
    for trace in speculative_rounds(target, drafter, PROMPT, settings, generator):
        yield trace, target.cache_length, drafter.cache_length


def test_the_cache_strip_matches_the_real_caches_after_every_kind_of_round(tiny_target, vocab):
    draft_model = perturbed_copy(tiny_target, scale=0.6, seed=7)
    kinds = set()
    for trace, target_length, draft_length in rounds_with_real_caches(tiny_target, draft_model, vocab, 3):
        k, a, context = trace.num_drafted, trace.num_accepted, trace.context_length
        kinds.add("bonus" if trace.is_bonus else "rejection" if a == 0 else "partial")
        target_row, draft_row = kvcache.cache_rows(trace, stage=5)
        # The lengths the strip draws are the caches' own, after the roll-back.
        assert target_row.kept == target_length == trace.caches.target_kept == context + a
        assert draft_row.kept == draft_length == trace.caches.draft_kept
        # The verification pass added the last token and the k drafts; the roll-back dropped the rejected.
        assert [c.kind for c in target_row.cells] == [kvcache.READ] + [kvcache.DRAFT] * k
        assert sum(c.dropped for c in target_row.cells) == k - a
        # The draft never fed its last proposal: after a bonus round it is one position further behind.
        last = draft_row.cells[-1]
        assert last.kind == kvcache.NOT_FED and last.token == trace.drafted_tokens[-1]
        assert last.dropped != trace.is_bonus  # a bonus round keeps it in the text, though not in the cache
        assert draft_length == (context + k - 1 if trace.is_bonus else context + a)
        # Before the roll-back nothing is greyed; before verification the target's row is not drawn.
        assert not any(c.dropped for row in kvcache.cache_rows(trace, stage=2) for c in row.cells)
        assert [row.model for row in kvcache.cache_rows(trace, stage=1)] == ["draft"]
    assert kinds == {"bonus", "rejection", "partial"}


def test_after_an_adaptive_stop_the_draft_has_fed_every_proposal(tiny_target, vocab):
    """It computed q for one more token, then proposed none: no unfed cell, and the strip still
    matches the caches."""
    draft_model = perturbed_copy(tiny_target, scale=0.6, seed=7)
    stops = 0
    for trace, _, draft_length in rounds_with_real_caches(tiny_target, draft_model, vocab, 3,
                                                          adaptive=True, draft_threshold=0.5):
        draft_row = kvcache.cache_rows(trace, stage=5)[1]
        assert draft_row.kept == draft_length
        if trace.draft_stop == STOP_CONFIDENCE:
            stops += 1
            assert trace.caches.draft_drafted == trace.context_length + trace.num_drafted
            assert all(cell.kind != kvcache.NOT_FED for cell in draft_row.cells)
    assert stops > 0


def test_an_ngram_drafter_has_no_cache_row(tiny_target, vocab):
    target = CachedModel(tiny_target, vocab)
    traces = list(speculative_rounds(target, NgramDrafter(vocab), PROMPT * 3,
                                     Settings(4, max_new_tokens=12, adaptive=False),
                                     torch.Generator().manual_seed(0)))
    assert all([row.model for row in kvcache.cache_rows(t, stage=5)] == ["target"] for t in traces)


def test_an_answer_with_a_code_block_is_split_into_prose_and_code():
    text = "Here you go:\n```python\ndef f():\n    return 1\n```\nThat is all."
    assert prose_and_code(text) == [
        ("prose", "Here you go:", None),
        ("code", "def f():\n    return 1", "python"),
        ("prose", "That is all.", None),
    ]
    assert prose_and_code("```\nunclosed") == [("code", "unclosed", None)]
    assert prose_and_code("plain <b>text</b>") == [("prose", "plain <b>text</b>", None)]
