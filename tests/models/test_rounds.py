"""The round loop on tiny random models built here: invariants, exactness, replays."""

import itertools

import pytest
import torch
from round_laws import PROMPT, emitted, exact_target_law
from scipy.stats import chisquare
from tiny_models import perturbed_copy

from specdec.config import SamplingConfig, Settings
from specdec.core.cached_model import CachedModel, ReducedHead
from specdec.core.drafters import Draft, LookupThenModelDrafter, ModelDrafter, NgramDrafter, stop_thresholds
from specdec.core.records import (
    DRAFTED_BY_LOOKUP,
    DRAFTED_BY_MODEL,
    STOP_BUDGET,
    STOP_CAP,
    STOP_CONFIDENCE,
    STOP_NO_MATCH,
)
from specdec.core.rounds import next_draft_cap, speculative_rounds, target_only_steps


@pytest.fixture(scope="module")
def tiny_draft(tiny_target):
    return perturbed_copy(tiny_target, scale=0.6, seed=7)


def run(target_model, drafter, vocab, sampling, seed=0, max_new_tokens=24, gamma=4, prompt=PROMPT,
        adaptive=False, threshold=0.0, pass_costs=()):
    target = CachedModel(target_model, vocab, pass_costs=pass_costs)
    generator = torch.Generator().manual_seed(seed)
    settings = Settings(gamma, sampling, max_new_tokens, adaptive=adaptive, draft_threshold=threshold)
    traces = list(speculative_rounds(target, drafter, prompt, settings, generator))
    return traces, target


@pytest.mark.parametrize("sampling", [SamplingConfig(temperature=0), SamplingConfig(temperature=1)], ids=str)
def test_draft_equal_to_target_accepts_every_token(tiny_target, vocab, sampling):
    traces, _ = run(tiny_target, ModelDrafter(tiny_target, vocab), vocab, sampling)
    assert all(t.num_accepted == t.num_drafted for t in traces)
    assert all(t.is_bonus for t in traces)


@pytest.mark.parametrize("drafter_kind", ["model", "ngram"])
def test_greedy_speculative_equals_greedy_target_only(tiny_target, tiny_draft, vocab, drafter_kind):
    drafter = ModelDrafter(tiny_draft, vocab) if drafter_kind == "model" else NgramDrafter(vocab, min_ngram=1)
    greedy = SamplingConfig(temperature=0)
    traces, _ = run(tiny_target, drafter, vocab, greedy, max_new_tokens=40)
    plain = [s.token for s in target_only_steps(CachedModel(tiny_target, vocab), PROMPT, greedy,
                                                torch.Generator(), 40)]
    assert emitted(traces) == plain
    # Not a vacuous pass: drafts were accepted, and (for the model) some rejected along the way.
    assert sum(t.num_accepted for t in traces) > 0
    if drafter_kind == "model":
        assert sum(t.num_accepted for t in traces) < sum(t.num_drafted for t in traces)


def test_caches_are_rolled_back_to_the_sequence(tiny_target, tiny_draft, vocab):
    """After each round both caches hold exactly the tokens the models have legitimately seen."""
    target = CachedModel(tiny_target, vocab)
    drafter = ModelDrafter(tiny_draft, vocab)
    generator = torch.Generator().manual_seed(3)
    length = len(PROMPT)
    saw_full_accept = saw_rejection = False
    settings = Settings(4, max_new_tokens=40, adaptive=False)
    for trace in speculative_rounds(target, drafter, PROMPT, settings, generator):
        length += len(trace.emitted_tokens)
        assert target.cache_length == length - 1  # all but the newest token, fed next round
        # The draft never saw its own last draft; after a full accept it is one token further behind.
        behind = 2 if trace.num_accepted == trace.num_drafted else 1
        assert drafter.cached.cache_length == length - behind
        saw_full_accept |= trace.num_accepted == trace.num_drafted
        saw_rejection |= trace.num_accepted < trace.num_drafted
    assert saw_full_accept and saw_rejection


def test_same_seed_same_run_different_seed_different_run(tiny_target, tiny_draft, vocab):
    def tokens(seed):
        traces, _ = run(tiny_target, ModelDrafter(tiny_draft, vocab), vocab, SamplingConfig(), seed=seed)
        return emitted(traces), [t.uniforms for t in traces]

    assert tokens(11) == tokens(11)
    assert tokens(11) != tokens(12)


def test_budget_is_respected_and_no_round_overshoots(tiny_target, tiny_draft, vocab):
    for budget in (1, 2, 5, 13):
        traces, _ = run(tiny_target, ModelDrafter(tiny_draft, vocab), vocab, SamplingConfig(),
                        max_new_tokens=budget)
        assert len(emitted(traces)) == budget


def test_stop_token_ends_the_run_and_is_kept(tiny_target, vocab):
    greedy = SamplingConfig(temperature=0)
    plain = [s.token for s in target_only_steps(CachedModel(tiny_target, vocab), PROMPT, greedy,
                                                torch.Generator(), 20)]
    stop = plain[5]
    target = CachedModel(tiny_target, vocab)
    traces = list(speculative_rounds(target, ModelDrafter(tiny_target, vocab), PROMPT,
                                     Settings(4, greedy, 20, adaptive=False), torch.Generator(),
                                     stop_token_ids={stop}))
    assert emitted(traces) == plain[: plain.index(stop) + 1]


def test_trace_records_what_a_teacher_shows(tiny_target, tiny_draft, vocab):
    traces, _ = run(tiny_target, ModelDrafter(tiny_draft, vocab), vocab, SamplingConfig(), seed=5)
    for t in traces:
        assert len(t.positions) == t.num_drafted + 1 and len(t.uniforms) == t.num_drafted
        for i, x in enumerate(t.drafted_tokens):
            assert x in t.positions[i].token_ids  # the drafted token is always shown
            ratio = t.target_token_probs[i] / t.draft_token_probs[i]
            assert t.accept_probs[i] == pytest.approx(min(1.0, ratio))
        assert t.positions[-1].draft_probs is None
        if t.is_bonus:
            assert all(p.residual_probs is None for p in t.positions)
        else:
            assert t.positions[t.num_accepted].residual_probs is not None
        assert t.emitted_tokens[-1] == t.next_token
        assert t.next_token in t.positions[t.num_accepted].token_ids  # the drawn token is shown too


@pytest.mark.slow  # thousands of sampled runs, ~8 s; the fast loop keeps the exact enumerations
@pytest.mark.parametrize(("reduced_head", "threshold", "pass_costs"),
                         [(False, None, ()), (True, None, ()), (False, 0.5, ()), (False, 0.8, ()),
                          (False, 0.1, (1.0, 1.9, 1.95))],
                         ids=["full head", "reduced head", "adaptive 0.5", "adaptive 0.8", "priced"])
def test_short_continuations_match_the_target_distribution(tiny_target, tiny_draft, vocab, reduced_head,
                                                           threshold, pass_costs):
    """Real (tiny) models, context-dependent p: the law of the first three tokens is the target's.

    Also with the draft's head cut to half the vocabulary (q = 0 elsewhere), and with adaptive length
    (rounds that stop drafting after 0, 1 or 2 tokens, rejections mid-round; priced by what passes
    cost, rounds that draft nothing): still exact.
    """
    head = ReducedHead.of(tiny_draft, list(range(0, vocab, 2))) if reduced_head else None
    warp = SamplingConfig(temperature=1.0, top_k=3)
    prompt = PROMPT[:3]
    exact = exact_target_law(tiny_target, vocab, prompt, warp, 3)
    counts, lengths, samples = dict.fromkeys(exact, 0), set(), 2000
    for seed in range(samples):
        traces, _ = run(tiny_target, ModelDrafter(tiny_draft, vocab, head=head), vocab, warp, seed=seed,
                        max_new_tokens=3, gamma=2, prompt=prompt, adaptive=threshold is not None,
                        threshold=threshold or 0.0, pass_costs=pass_costs)
        counts[tuple(emitted(traces))] += 1  # KeyError = a sequence the target cannot produce
        lengths |= {(t.num_drafted, t.draft_stop) for t in traces}
    if threshold:  # the threshold really cut rounds short (priced: even before the first draft)
        assert (0 if pass_costs else 1, STOP_CONFIDENCE) in lengths, lengths
    if pass_costs:  # and priced rounds that drafted nothing sat beside rounds that drafted all they could
        assert (2, STOP_CAP) in lengths, lengths
    keys = list(exact)
    observed = [counts[k] for k in keys]
    total = sum(exact.values())  # float32 products: renormalise so chisquare's sums agree
    expected = [exact[k] / total * samples for k in keys]
    assert chisquare(observed, expected).pvalue > 1e-3


def test_ngram_drafter_proposes_the_latest_continuation(vocab):
    drafter = NgramDrafter(vocab, max_ngram=2, min_ngram=1)
    sequence = [1, 2, 3, 9, 1, 2, 4, 5, 6, 1, 2]
    assert drafter.continuation(sequence, 3) == [4, 5, 6]  # latest earlier "1 2" is followed by 4 5 6
    assert drafter.continuation([7, 8, 9], 3) == []
    draft = drafter.propose(sequence, 3, SamplingConfig(), torch.Generator())
    assert draft.probs.sum(-1).tolist() == [1.0, 1.0, 1.0]
    assert draft.probs[torch.arange(3), draft.tokens].tolist() == [1.0, 1.0, 1.0]


def test_prompt_of_one_token(tiny_target, tiny_draft, vocab):
    traces, target = run(tiny_target, ModelDrafter(tiny_draft, vocab), vocab, SamplingConfig(),
                         prompt=[7], max_new_tokens=6)
    assert len(emitted(traces)) == 6 and target.cache_length == 6


def test_every_top_k_combination_is_shown_consistently(tiny_target, tiny_draft, vocab):
    for top_k, top_p in itertools.product([0, 5], [1.0, 0.5]):
        traces, _ = run(tiny_target, ModelDrafter(tiny_draft, vocab), vocab,
                        SamplingConfig(top_k=top_k, top_p=top_p), max_new_tokens=8)
        for t in traces:
            for shown in t.positions:
                assert all(0.0 <= p <= 1.0 for p in shown.target_probs)


def test_reduced_head_scores_only_its_tokens_and_matches_the_full_head_there(tiny_draft, vocab):
    kept = list(range(5, vocab, 3))
    full = CachedModel(tiny_draft, vocab).extend(PROMPT)
    reduced = CachedModel(tiny_draft, vocab, ReducedHead.of(tiny_draft, kept)).extend(PROMPT)
    torch.testing.assert_close(reduced[:, kept], full[:, kept], rtol=1e-4, atol=1e-4)
    outside = torch.ones(vocab, dtype=torch.bool)
    outside[kept] = False
    assert torch.isneginf(reduced[:, outside]).all()


def test_greedy_with_a_reduced_draft_head_equals_target_only(tiny_target, tiny_draft, vocab):
    greedy = SamplingConfig(temperature=0)
    head = ReducedHead.of(tiny_draft, list(range(0, vocab, 2)))
    traces, _ = run(tiny_target, ModelDrafter(tiny_draft, vocab, head=head), vocab, greedy, max_new_tokens=30)
    plain = [s.token for s in target_only_steps(CachedModel(tiny_target, vocab), PROMPT, greedy,
                                                torch.Generator(), 30)]
    assert emitted(traces) == plain


@pytest.mark.parametrize("threshold", [0.3, 0.6, 0.95])
def test_greedy_adaptive_equals_greedy_target_only(tiny_target, tiny_draft, vocab, threshold):
    greedy = SamplingConfig(temperature=0)
    traces, _ = run(tiny_target, ModelDrafter(tiny_draft, vocab), vocab, greedy, max_new_tokens=40,
                    gamma=6, adaptive=True, threshold=threshold)
    plain = [s.token for s in target_only_steps(CachedModel(tiny_target, vocab), PROMPT, greedy,
                                                torch.Generator(), 40)]
    assert emitted(traces) == plain
    assert any(t.draft_stop == STOP_CONFIDENCE for t in traces)


def test_adaptive_stops_only_below_the_threshold_and_says_why(tiny_target, tiny_draft, vocab):
    threshold = 0.5
    traces, _ = run(tiny_target, ModelDrafter(tiny_draft, vocab), vocab, SamplingConfig(), seed=4,
                    max_new_tokens=60, gamma=6, adaptive=True, threshold=threshold)
    unsure_first_drafts = 0
    for t in traces:
        kept_confidence = 1.0
        for shown in t.positions[: t.num_drafted]:  # the drafted tokens' q (top of q is among shown)
            kept_confidence *= max(shown.draft_probs)
        # Every draft after the first kept the product above the threshold; the first is always made
        # (verifying one draft costs the target's pass nothing).
        assert kept_confidence >= threshold or t.num_drafted == 1
        unsure_first_drafts += kept_confidence < threshold
        if t.draft_stop == STOP_CONFIDENCE:
            assert t.num_drafted >= 1 and t.stop_confidence < threshold
            assert t.stop_confidence < kept_confidence
        else:
            budget_left = 60 - (t.context_length - len(PROMPT)) - 1
            assert t.stop_confidence is None and t.num_drafted in (t.draft_cap, budget_left)
        assert 1 <= t.draft_cap <= 6
    assert {t.draft_stop for t in traces} >= {STOP_CONFIDENCE, STOP_CAP}
    assert unsure_first_drafts > 0  # the rule really made first drafts below the threshold
    assert len({t.draft_cap for t in traces}) > 1  # the cap moved with acceptance


def test_the_cap_follows_acceptance(vocab):
    def draft(k, stop=STOP_CAP):
        return Draft(torch.zeros(k, dtype=torch.long), torch.zeros(k, vocab), stop)

    assert next_draft_cap(4, draft(4), num_accepted=4, gamma=8) == 6  # all survived: two more
    assert next_draft_cap(7, draft(7), num_accepted=7, gamma=8) == 8  # never above γ
    assert next_draft_cap(4, draft(4), num_accepted=2, gamma=8) == 3  # a rejection: one fewer
    assert next_draft_cap(1, draft(1), num_accepted=0, gamma=8) == 1  # never below 1
    assert next_draft_cap(4, draft(2, STOP_CONFIDENCE), num_accepted=2, gamma=8) == 4  # stopped early


def test_stop_reasons_of_fixed_rounds(tiny_target, tiny_draft, vocab):
    traces, _ = run(tiny_target, ModelDrafter(tiny_draft, vocab), vocab, SamplingConfig(), max_new_tokens=10)
    for t in traces:
        budget_left = 10 - (t.context_length - len(PROMPT)) - 1
        assert t.num_drafted == min(4, budget_left) and t.draft_cap == 4
        assert t.draft_stop == (STOP_BUDGET if budget_left < 4 else STOP_CAP)
    assert traces[-1].draft_stop == STOP_BUDGET
    ngram, _ = run(tiny_target, NgramDrafter(vocab), vocab, SamplingConfig(), max_new_tokens=6)
    assert ngram[0].draft_stop == STOP_NO_MATCH and ngram[0].num_drafted == 0


def test_lean_traces_skip_the_tables_and_nothing_else(tiny_target, tiny_draft, vocab):
    def traces(detail):
        target = CachedModel(tiny_target, vocab)
        return list(speculative_rounds(target, ModelDrafter(tiny_draft, vocab), PROMPT,
                                       Settings(4, max_new_tokens=20), torch.Generator().manual_seed(2),
                                       detail=detail))

    full, lean = traces(True), traces(False)
    assert all(t.positions for t in full) and not any(t.positions for t in lean)
    strip = ("positions", "draft_seconds", "verify_seconds")
    assert [{k: v for k, v in t.to_dict().items() if k not in strip} for t in lean] == \
        [{k: v for k, v in t.to_dict().items() if k not in strip} for t in full]


def test_lookup_then_model_copies_when_it_can_and_stays_exact(tiny_target, tiny_draft, vocab):
    """Greedy: the same tokens as plain decoding; rounds drafted by both the lookup and the model."""
    greedy = SamplingConfig(temperature=0)
    drafter = LookupThenModelDrafter(NgramDrafter(vocab, min_ngram=1), ModelDrafter(tiny_draft, vocab))
    prompt = PROMPT * 2  # repeats itself: the lookup finds matches
    traces, target = run(tiny_target, drafter, vocab, greedy, max_new_tokens=40, prompt=prompt)
    plain = [s.token for s in target_only_steps(CachedModel(tiny_target, vocab), prompt, greedy,
                                                torch.Generator(), 40)]
    assert emitted(traces) == plain
    assert {t.drafted_by for t in traces} == {DRAFTED_BY_LOOKUP, DRAFTED_BY_MODEL}
    # The model's cache caught up after copied rounds: it holds no token the text does not have.
    assert drafter.cache_length <= target.cache_length + 1


@pytest.mark.slow  # thousands of sampled runs, ~8 s; the fast loop keeps the exact enumerations
def test_lookup_then_model_keeps_the_target_distribution(tiny_target, tiny_draft, vocab):
    warp = SamplingConfig(temperature=1.0, top_k=3)
    prompt = [*PROMPT[:3], *PROMPT[:2]]  # the last two tokens occurred before: the lookup proposes
    exact = exact_target_law(tiny_target, vocab, prompt, warp, 3)
    counts, sources, samples = dict.fromkeys(exact, 0), set(), 2000
    for seed in range(samples):
        drafter = LookupThenModelDrafter(NgramDrafter(vocab, min_ngram=1), ModelDrafter(tiny_draft, vocab))
        traces, _ = run(tiny_target, drafter, vocab, warp, seed=seed, max_new_tokens=3, gamma=2,
                        prompt=prompt)
        counts[tuple(emitted(traces))] += 1
        sources |= {t.drafted_by for t in traces if t.num_drafted}
    assert sources == {DRAFTED_BY_LOOKUP, DRAFTED_BY_MODEL}
    keys = list(exact)
    total = sum(exact.values())
    assert chisquare([counts[k] for k in keys], [exact[k] / total * samples for k in keys]).pvalue > 1e-3


def test_a_pass_too_dear_for_any_draft_makes_every_round_a_plain_step(tiny_target, tiny_draft, vocab):
    """Where one more token in the pass costs 9 plain steps no draft can pay for itself: nothing is
    drafted, each round is a plain decoding step, and the output is still plain decoding's."""
    greedy = SamplingConfig(temperature=0)
    traces, _ = run(tiny_target, ModelDrafter(tiny_draft, vocab), vocab, greedy, max_new_tokens=20, gamma=4,
                    adaptive=True, threshold=0.1, pass_costs=(1.0, 10.0))
    plain = [s.token for s in target_only_steps(CachedModel(tiny_target, vocab), PROMPT, greedy,
                                                torch.Generator(), 20)]
    assert emitted(traces) == plain
    assert all(t.num_drafted == 0 and len(t.emitted_tokens) == 1 for t in traces)
    assert all(t.draft_stop == STOP_CONFIDENCE for t in traces[:-1])  # the last: no budget left to draft
    assert all(t.stop_threshold == pytest.approx(9.0) for t in traces[:-1])
    # Negative control: the same run with passes priced as free drafts in most rounds.
    free, _ = run(tiny_target, ModelDrafter(tiny_draft, vocab), vocab, greedy, max_new_tokens=20, gamma=4,
                  adaptive=True, threshold=0.1)
    assert sum(t.num_drafted > 0 for t in free) > len(free) / 2


@pytest.mark.parametrize("pass_costs", [(1.0, 1.5, 1.55, 1.6, 1.65, 1.7, 1.75), (1.0, 1.05, 1.1, 1.5, 1.55)],
                         ids=["dear from 2 tokens", "dear from 4 tokens"])
def test_priced_drafts_stop_only_where_they_do_not_pay_and_stay_exact(tiny_target, tiny_draft, vocab,
                                                                       pass_costs):
    greedy = SamplingConfig(temperature=0)
    traces, target = run(tiny_target, ModelDrafter(tiny_draft, vocab), vocab, greedy, max_new_tokens=40,
                         gamma=6, adaptive=True, threshold=0.1, pass_costs=pass_costs)
    plain = [s.token for s in target_only_steps(CachedModel(tiny_target, vocab), PROMPT, greedy,
                                                torch.Generator(), 40)]
    assert emitted(traces) == plain
    thresholds = stop_thresholds(0.1, pass_costs, 6)
    for t in traces:
        if t.draft_stop == STOP_CONFIDENCE:  # the threshold it fell below is the priced one at that draft
            assert t.stop_threshold == pytest.approx(thresholds[t.num_drafted])
            assert t.stop_confidence < t.stop_threshold
    assert {t.draft_stop for t in traces} >= {STOP_CONFIDENCE}
