"""The batched loop on tiny random models: a batch of one is the single loop, every row is its own
single run, rows leave, ragged caches give each row its own logits, and T > 0 keeps the target's law."""


import pytest
import torch
from round_laws import exact_target_law
from scipy.stats import chisquare
from tiny_models import perturbed_copy

from specdec.config import SamplingConfig, Settings
from specdec.core.batch_cache import BatchCachedModel
from specdec.core.batch_drafters import BatchDrafter
from specdec.core.batch_rounds import batch_speculative_rounds, batch_target_only_steps
from specdec.core.cached_model import CachedModel
from specdec.core.drafters import LookupThenModelDrafter, ModelDrafter, NgramDrafter
from specdec.core.records import DRAFTED_BY_LOOKUP, DRAFTED_BY_MODEL
from specdec.core.rounds import speculative_rounds, target_only_steps
from specdec.core.sampling import warp_probs

# Rows of different lengths; the third repeats itself (the lookup finds matches), the last is one token.
PROMPTS = [[5, 17, 42, 8, 99, 3], [7, 7, 8], [5, 17, 42, 8, 99, 3, 5, 17, 42, 1, 2, 3, 4], [9]]
GREEDY, SAMPLED = SamplingConfig(temperature=0), SamplingConfig(temperature=1.0)


@pytest.fixture(scope="module")
def tiny_draft(tiny_target):
    return perturbed_copy(tiny_target, scale=0.6, seed=7)


def drafters(kind, draft_model, vocab, rows):
    """(single-sequence drafter factory, batch drafter) of one kind."""
    lookup = NgramDrafter(vocab, min_ngram=1)
    if kind == "ngram":
        return (lambda: NgramDrafter(vocab, min_ngram=1)), BatchDrafter(rows, vocab, lookup)
    if kind == "model":
        return (lambda: ModelDrafter(draft_model, vocab)), BatchDrafter(rows, vocab, model=draft_model)
    def make():
        return LookupThenModelDrafter(NgramDrafter(vocab, min_ngram=1), ModelDrafter(draft_model, vocab))

    return make, BatchDrafter(rows, vocab, lookup, draft_model)


def single_runs(target_model, make_drafter, vocab, prompts, settings, seeds, stop=frozenset()):
    """The single loop, with chains as a batch verifies them."""
    return [list(speculative_rounds(CachedModel(target_model, vocab), make_drafter(), prompt, settings,
                                    torch.Generator().manual_seed(seed), stop, detail=False))
            for prompt, seed in zip(prompts, seeds, strict=True)]


def batch_run(target_model, batch_drafter, vocab, prompts, settings, seeds, stop=frozenset()):
    """-> (per row traces, the BatchRounds)"""
    generators = [torch.Generator().manual_seed(s) for s in seeds]
    target = BatchCachedModel(target_model, vocab, len(prompts))
    rounds = list(batch_speculative_rounds(target, batch_drafter, prompts, settings, generators, stop))
    per_row = [[] for _ in prompts]
    for batch_round in rounds:
        for row, trace in zip(batch_round.rows, batch_round.traces, strict=True):
            per_row[row].append(trace)
    return per_row, rounds


def comparable(trace):
    """A trace without its timings (the batch's passes take their own time)."""
    return {k: v for k, v in trace.to_dict().items() if k not in ("draft_seconds", "verify_seconds")}


def emitted(traces):
    return [t for trace in traces for t in trace.emitted_tokens]


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["T=0", "T=1"])
@pytest.mark.parametrize("kind", ["ngram", "model", "lookup then model"])
def test_a_batch_of_one_is_the_single_loop(tiny_target, tiny_draft, vocab, kind, sampling):
    """Token for token and record for record: drafts, q, verdicts, coin flips, cache lengths."""
    settings = Settings(4, sampling, 30, adaptive=True, draft_threshold=0.3)
    for prompt in PROMPTS:
        make, batch_drafter = drafters(kind, tiny_draft, vocab, 1)
        single = single_runs(tiny_target, make, vocab, [prompt], settings, [3])[0]
        batched = batch_run(tiny_target, batch_drafter, vocab, [prompt], settings, [3])[0][0]
        assert [comparable(t) for t in batched] == [comparable(t) for t in single]


@pytest.mark.slow  # about a second on a 2-core machine: the whole suite runs it
@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["T=0", "T=1"])
def test_every_row_is_its_own_single_run(tiny_target, tiny_draft, vocab, sampling):
    """Rows of different lengths, drafted by the lookup or the model, accepting different counts: each
    row emits what its prompt alone emits with its seed (its own generator), whatever the others do."""
    settings = Settings(4, sampling, 30, adaptive=True, draft_threshold=0.3)
    seeds = [0, 1, 2, 3]
    make, batch_drafter = drafters("lookup then model", tiny_draft, vocab, len(PROMPTS))
    single = single_runs(tiny_target, make, vocab, PROMPTS, settings, seeds)
    batched, rounds = batch_run(tiny_target, batch_drafter, vocab, PROMPTS, settings, seeds)
    assert [emitted(t) for t in batched] == [emitted(t) for t in single]
    def accepted(runs):
        return [[t.num_accepted for t in row] for row in runs]

    assert accepted(batched) == accepted(single)
    # Not vacuous: within one round rows accepted different counts, and both drafters drafted.
    assert any(len({t.num_accepted for t in r.traces}) > 1 for r in rounds)
    assert {t.drafted_by for row in batched for t in row if t.num_drafted} == {DRAFTED_BY_LOOKUP,
                                                                                 DRAFTED_BY_MODEL}


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
@pytest.mark.parametrize("kind", ["ngram", "model", "lookup then model"])
def test_greedy_rows_equal_plain_greedy_decoding(tiny_target, tiny_draft, vocab, kind):
    settings = Settings(4, GREEDY, 40, adaptive=False)
    _, batch_drafter = drafters(kind, tiny_draft, vocab, len(PROMPTS))
    batched, _ = batch_run(tiny_target, batch_drafter, vocab, PROMPTS, settings, [0] * len(PROMPTS))
    steps = batch_target_only_steps(BatchCachedModel(tiny_target, vocab, len(PROMPTS)), PROMPTS, GREEDY,
                                    [torch.Generator() for _ in PROMPTS], 40)
    plain_batched = [[] for _ in PROMPTS]
    for step in steps:
        for row, token in zip(step.rows, step.tokens, strict=True):
            plain_batched[row].append(token)
    for row, prompt in enumerate(PROMPTS):
        plain = [s.token for s in target_only_steps(CachedModel(tiny_target, vocab), prompt, GREEDY,
                                                    torch.Generator(), 40)]
        assert emitted(batched[row]) == plain == plain_batched[row]
    assert sum(t.num_accepted for row in batched for t in row) > 0


def test_rows_leave_the_batch_and_the_others_go_on(tiny_target, tiny_draft, vocab):
    """All rows share one budget, so a stop token is the way out early: make the third token of one
    row's greedy output the stop token. That row leaves after the round that emitted it; the others go on."""
    settings = Settings(3, GREEDY, 20, adaptive=False)
    plain = [s.token for s in target_only_steps(CachedModel(tiny_target, vocab), PROMPTS[1], GREEDY,
                                                torch.Generator(), 20)]
    stop = {plain[2]}
    _, batch_drafter = drafters("model", tiny_draft, vocab, len(PROMPTS))
    batched, rounds = batch_run(tiny_target, batch_drafter, vocab, PROMPTS, settings, [0] * 4, stop)
    assert emitted(batched[1]) == plain[: plain.index(plain[2]) + 1]  # cut after the stop token
    left = next(r for r in rounds if 1 in r.finished)
    assert all(1 not in r.rows for r in rounds[left.index + 1 :])
    assert len(rounds[-1].rows) < len(PROMPTS)  # the batch shrank
    later = [r for r in rounds if r.index > left.index]
    assert later and all(len(r.traces) == len(r.rows) for r in later)
    for row in range(len(PROMPTS)):  # every other row still ends at its stop token or its budget
        tokens = emitted(batched[row])
        assert len(tokens) == 20 or tokens[-1] in stop


def test_ragged_caches_give_each_row_its_own_logits(tiny_target, vocab):
    """After rows kept different numbers of fed tokens (holes in the cache), each row's next logits are
    the ones a single-sequence cache holding just its tokens gives."""
    batch = BatchCachedModel(tiny_target, vocab, 3)
    rows = [list(p) for p in PROMPTS[:3]]
    batch.extend([r[:-1] for r in rows])
    fed = [[rows[0][-1], 11, 12, 13], [rows[1][-1], 21], [rows[2][-1], 31, 32]]
    batch.extend(fed)
    kept = [1, 1, 0]  # drafts each row keeps: one of three, its only one, none of two
    lengths = [len(r) - 1 + k + 1 for r, k in zip(rows, kept, strict=True)]
    batch.rollback(lengths)
    assert batch.lengths == lengths
    sequences = [rows[i] + fed[i][1 : kept[i] + 1] for i in range(3)]
    nexts = [[40], [41, 42], [43]]
    logits = batch.extend(nexts)
    for i in range(3):
        single = CachedModel(tiny_target, vocab)
        single.extend(sequences[i])
        expected = single.extend(nexts[i])
        assert torch.allclose(logits[i], expected, atol=1e-5), i


def test_one_row_leaving_keeps_the_others_caches(tiny_target, vocab):
    batch = BatchCachedModel(tiny_target, vocab, 3)
    batch.extend([p[:-1] for p in PROMPTS[:3]])
    batch.keep([0, 2])
    assert batch.rows == 2 and batch.lengths == [len(PROMPTS[0]) - 1, len(PROMPTS[2]) - 1]
    logits = batch.extend([[PROMPTS[0][-1]], [PROMPTS[2][-1]]])
    single = CachedModel(tiny_target, vocab)
    assert torch.allclose(logits[1], single.extend(PROMPTS[2])[-1:], atol=1e-5)


def test_first_round_law_of_a_row_by_exact_enumeration(tiny_target, tiny_draft, vocab):
    """In a ragged batch, one row's first round: enumerate the draft's choices and the rule's outcomes
    exactly (min(1, p/q) and the residual, from the row's own p and q as the batch computed them) ->
    the first emitted token is distributed exactly as the target's p."""
    warp = SamplingConfig(temperature=1.0, top_k=3)
    prompts = [PROMPTS[0][:3], PROMPTS[2], PROMPTS[1]]
    batch_drafter = BatchDrafter(3, vocab, model=tiny_draft)
    target = BatchCachedModel(tiny_target, vocab, 3)
    target.extend([p[:-1] for p in prompts])
    drafts = batch_drafter.propose(prompts, [1, 1, 1], warp, [torch.Generator().manual_seed(0)] * 3)
    # Every first draft x the draft could have proposed, with its q, verified in the same batch shape.
    row = 0
    draft_q = drafts[row].probs[0]
    law = torch.zeros(vocab)
    for x in draft_q.nonzero().flatten().tolist():
        fed = [[p[-1], int(d.tokens[0]) if i != row else x]
               for i, (p, d) in enumerate(zip(prompts, drafts, strict=True))]
        p = warp_probs(target.extend(fed)[row], warp)
        target.rollback([len(q) - 1 for q in prompts])
        accept = min(1.0, float(p[0, x] / draft_q[x]))
        law[x] += draft_q[x] * accept
        residual = torch.clamp(p[0] - draft_q, min=0)
        if residual.sum() > 0:
            law += draft_q[x] * (1 - accept) * residual / residual.sum()
    exact = exact_target_law(tiny_target, vocab, prompts[row], warp, 1)
    target_p = torch.zeros(vocab)
    for (token,), mass in exact.items():
        target_p[token] = mass
    assert torch.allclose(law, target_p, atol=1e-5)


@pytest.mark.slow  # 2,000 sampled rows, ~6 s
def test_rows_follow_the_target_law(tiny_target, tiny_draft, vocab):
    """χ²: the first three tokens of rows decoded in ragged batches (beside rows of other lengths,
    with the lookup and the model drafting) follow the target's exact law."""
    warp = SamplingConfig(temperature=1.0, top_k=3)
    prompt = [*PROMPTS[0][:3], *PROMPTS[0][:2]]  # the last two tokens occurred before: the lookup proposes
    exact = exact_target_law(tiny_target, vocab, prompt, warp, 3)
    settings = Settings(2, warp, 3, adaptive=False)
    counts, samples, batch_size = dict.fromkeys(exact, 0), 2000, 8
    others = [PROMPTS[1], PROMPTS[2], PROMPTS[3], PROMPTS[0]]
    for start in range(0, samples, batch_size // 2):
        prompts = [prompt if i % 2 == 0 else others[i // 2] for i in range(batch_size)]
        _, batch_drafter = drafters("lookup then model", tiny_draft, vocab, batch_size)
        seeds = [start * batch_size + i for i in range(batch_size)]
        per_row, _ = batch_run(tiny_target, batch_drafter, vocab, prompts, settings, seeds)
        for i in range(0, batch_size, 2):
            counts[tuple(emitted(per_row[i]))] += 1  # KeyError = a sequence the target cannot produce
    keys = list(exact)
    total = sum(exact.values())
    assert chisquare([counts[k] for k in keys], [exact[k] / total * samples for k in keys]).pvalue > 1e-3


@pytest.mark.slow  # the bundled pair, six code prompts of different lengths, ~40 s
def test_bundled_rows_equal_their_own_plain_greedy_output(bundled_pair):
    """fp32, T = 0, the default drafter: every row of a batch of the held-out code prompts (45 to 49
    tokens, so the caches are ragged from the start) emits that prompt's own plain greedy output."""
    import json

    from specdec.models.batch_runs import batch_generate
    from specdec.models.runs import generate
    from specdec.paths import HELD_OUT_PROMPT_SETS

    prompts = json.loads(HELD_OUT_PROMPT_SETS["code"].read_text())["prompts"]
    settings = Settings(sampling=GREEDY, max_new_tokens=48)
    ids = [bundled_pair.encode_prompt(p, True, 48) for p in prompts]
    assert len({len(i) for i in ids}) > 1
    result = batch_generate(bundled_pair, ids, settings)
    for row, prompt_ids in enumerate(ids):
        plain = generate(bundled_pair, prompt_ids, settings, speculative=False).token_ids
        assert result.token_ids[row] == plain, row
    assert any(t.num_accepted for row in result.rounds for t in row)
