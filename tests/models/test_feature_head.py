"""The feature head (EAGLE-style) on a tiny target: training, exactness, features that roll back."""

import json
from dataclasses import replace

import pytest
import torch
from round_laws import PROMPT, emitted, exact_target_law
from rule_laws import emitted_distribution
from safetensors.torch import load_file
from scipy.stats import chisquare
from tiny_models import tiny_model

from specdec.config import DraftTrainingConfig, HeadTrainingConfig, SamplingConfig, Settings
from specdec.core.cached_model import CachedModel, ReducedHead
from specdec.core.drafters import FeatureDrafter, LookupThenModelDrafter, NgramDrafter
from specdec.core.feature_head import FeatureHead
from specdec.core.records import STOP_CONFIDENCE
from specdec.core.rounds import speculative_rounds, target_only_steps
from specdec.core.sampling import warp_probs
from specdec.errors import SpecDecError
from specdec.kernels.decoder_step import head_step_by_hand
from specdec.models.feature_head_files import HEAD_TOKENS, HEAD_WEIGHTS, SHIPPED_HEAD, load_head, save_head
from specdec.models.loading import SHIPPED_DRAFT, SHIPPED_DRAFT_WEIGHTS, LoadedModel
from specdec.models.runs import generate
from specdec.training import train_feature_head as head_training
from specdec.training.campaign import run_campaign
from specdec.training.features import target_features, target_layer_features
from specdec.training.train_draft import draw_weights
from specdec.training.train_feature_head import (
    FeatureExample,
    build_head,
    evaluate_head,
    head_step,
    make_batch,
    train_head,
    unrolled_predictions,
)


def tiny_corpus(target, vocab, count=48, length=40):
    """The tiny target's own continuations of random prompts, sampled and greedy, with its features."""
    generator = torch.Generator().manual_seed(0)
    examples = []
    for index in range(count):
        prompt = torch.randint(vocab, (4,), generator=generator).tolist()
        sampling = SamplingConfig(temperature=index % 2)
        steps = target_only_steps(CachedModel(target, vocab), prompt, sampling, generator, length)
        sequence = torch.tensor(prompt + [s.token for s in steps])
        examples.append(FeatureExample(sequence, target_features(target, [sequence])[0], len(prompt)))
    return examples


def train_tiny_head(target, examples, head_token_ids, steps):
    torch.manual_seed(0)
    head = build_head(target, layers=1)
    embed, rows = target.get_input_embeddings(), target.lm_head.weight.detach()[head_token_ids]
    optimizer = torch.optim.AdamW(head.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(1)
    for _ in range(steps):
        picked = torch.randint(len(examples), (8,), generator=generator)
        head_step(head, optimizer, make_batch([examples[i] for i in picked], embed), rows, 3e-3, unroll=2,
                  feature_weight=0.1, generator=None)
    return head.eval()


@pytest.fixture(scope="module")
def corpus(tiny_target, vocab):
    return tiny_corpus(tiny_target, vocab)


@pytest.fixture(scope="module")
def tiny_head(tiny_target, corpus, vocab):
    """Trained for 150 steps on the target's own text (the corpus and the training: ~10 s of CPU)."""
    return train_tiny_head(tiny_target, corpus[:40], list(range(vocab)), steps=150)


@pytest.fixture(scope="module")
def untrained_head(tiny_target):
    """A head as training starts it (from the target's last layer: its drafts are sometimes right). The
    engine's laws hold for any head: the fast loop checks them with this one, the slow tests with the
    trained one."""
    torch.manual_seed(0)
    return build_head(tiny_target, layers=1).eval()


def head_drafter(tiny_target, tiny_head, vocab, token_ids=None):
    target = CachedModel(tiny_target, vocab, keep_features=True)
    reduced = ReducedHead.of(tiny_target, token_ids or list(range(vocab)))
    return target, FeatureDrafter(tiny_head, target, reduced, step=head_step_by_hand(tiny_head))


@pytest.mark.slow  # the tiny target writes 48 continuations and a head trains 150 steps on them, ~10 s
def test_training_raises_the_heads_agreement_on_held_out_text(tiny_target, corpus, tiny_head, vocab):
    embed, rows = tiny_target.get_input_embeddings(), tiny_target.lm_head.weight.detach()
    held_out = corpus[40:]
    untrained = evaluate_head(build_head(tiny_target, 1).eval(), held_out, embed, rows, unroll=2)
    trained = evaluate_head(tiny_head, held_out, embed, rows, unroll=2)
    assert trained["sum_min_pq"] > untrained["sum_min_pq"] + 0.1, (untrained, trained)
    assert trained["agree_1_in_a_row"] > untrained["agree_1_in_a_row"] + 0.1
    assert trained["agree_2_in_a_row"] <= trained["agree_1_in_a_row"]


def test_a_head_started_from_a_draft_drafts_as_that_draft_whatever_the_feature(tiny_target, vocab, tmp_path,
                                                                              monkeypatch):
    draft = tiny_model(vocab, seed=3)  # the target's shapes, 2 layers, its own weights
    draft.set_input_embeddings(tiny_target.get_input_embeddings())  # shared, as the bundled draft's are
    head = build_head(tiny_target, layers=2, draft_layers=draft.state_dict()).eval()
    ids = torch.tensor([PROMPT])
    with torch.no_grad():
        wanted = draft.model(input_ids=ids).last_hidden_state  # what the draft's output head reads
        for seed in (0, 1):  # any feature: at the start the head reads the token's embedding alone
            features = torch.randn(wanted.shape, generator=torch.Generator().manual_seed(seed))
            predicted = head(tiny_target.get_input_embeddings()(ids), features)
            torch.testing.assert_close(predicted, wanted)
    with pytest.raises(SpecDecError, match="do not fit a 1-layer head"):
        build_head(tiny_target, layers=1, draft_layers=draft.state_dict())
    # Saved and loaded, it keeps its feature norm (a head without one reads features at their own scale)
    # and adds fc(feature) to the embedding (half the weights of fc over [embedding ; feature]).
    plain = build_head(tiny_target, layers=1)
    assert head.feature_norm is not None and plain.feature_norm is None
    hidden = tiny_target.config.hidden_size
    assert (head.fc.in_features, plain.fc.in_features) == (hidden, 2 * hidden)
    with torch.no_grad():
        head.fc.weight.normal_(std=0.1)  # now it reads the feature too
        features = torch.randn(wanted.shape, generator=torch.Generator().manual_seed(2))
        before = head(tiny_target.get_input_embeddings()(ids), features)
    save_head(head, tmp_path, list(range(vocab)), {"tiny": True})
    monkeypatch.setenv("SPECDEC_DTYPE", "float32")  # the saved weights as they are, not int8 where faster
    loaded = load_head(str(tmp_path), LoadedModel("tiny", tiny_target, None)).head
    with torch.no_grad():
        torch.testing.assert_close(loaded(tiny_target.get_input_embeddings()(ids), features), before,
                                   atol=0.05, rtol=0.05)  # saved in bf16


def test_code_share_draws_code_at_that_share_and_the_rest_in_proportion():
    kinds = ["code"] * 3 + ["prose"] * 6 + ["math"] * 3  # code is a quarter of the data
    examples = [FeatureExample(torch.zeros(2, dtype=torch.long), torch.zeros(2, 4), 1, k) for k in kinds]
    assert draw_weights(examples, 0.0) is None  # every answer alike (uniform draws)
    weights = draw_weights(examples, 0.6)
    code = torch.tensor([k == "code" for k in kinds])
    assert weights.sum().item() == pytest.approx(1.0) and weights[code].sum().item() == pytest.approx(0.6)
    assert torch.allclose(weights[code], weights[0]) and torch.allclose(weights[~code], weights[-1])
    with pytest.raises(SpecDecError, match="both code answers and others"):
        draw_weights(examples[:3], 0.5)
    with pytest.raises(SpecDecError, match="with --campaign"):
        HeadTrainingConfig(code_share=0.5)
    with pytest.raises(SpecDecError, match="below 1"):
        HeadTrainingConfig(campaign=True, code_share=1.0)
    with pytest.raises(SpecDecError, match="with --campaign"):  # the draft's training shares the rule
        DraftTrainingConfig(code_share=0.5)


def test_cached_target_keeps_and_rolls_back_its_features(tiny_target, vocab):
    sequence = PROMPT + [11, 12, 13, 14]
    target = CachedModel(tiny_target, vocab, keep_features=True)
    plain_logits = CachedModel(tiny_target, vocab).extend(sequence)
    torch.testing.assert_close(target.extend(sequence), plain_logits)  # the same logits as without features
    target.rollback(len(PROMPT))
    target.extend([21, 22])
    fresh = target_features(tiny_target, [torch.tensor(PROMPT + [21, 22])])[0].float()
    assert target.features.shape == (len(PROMPT) + 2, tiny_target.config.hidden_size)
    torch.testing.assert_close(target.features, fresh, atol=2e-2, rtol=2e-2)  # bf16 in target_features


@pytest.mark.parametrize(("lookup_first", "threshold"), [(False, None), (False, 0.05), (True, None)],
                         ids=["fixed", "adaptive 0.05", "lookup first"])
def test_greedy_with_the_head_equals_greedy_target_only(tiny_target, untrained_head, vocab, lookup_first,
                                                        threshold):
    greedy = SamplingConfig(temperature=0)
    plain = [s.token for s in target_only_steps(CachedModel(tiny_target, vocab), PROMPT, greedy,
                                                torch.Generator(), 40)]
    target, drafter = head_drafter(tiny_target, untrained_head, vocab)
    if lookup_first:
        drafter = LookupThenModelDrafter(NgramDrafter(vocab), drafter)
    settings = Settings(4, greedy, 40, adaptive=threshold is not None, draft_threshold=threshold or 0.2)
    traces = list(speculative_rounds(target, drafter, PROMPT, settings, torch.Generator()))
    assert emitted(traces) == plain
    accepted, drafted = sum(t.num_accepted for t in traces), sum(t.num_drafted for t in traces)
    assert 0 < accepted < drafted  # drafts were accepted, and some rejected mid-round


def test_head_reads_the_same_state_after_rollbacks_as_from_scratch(tiny_target, untrained_head, vocab):
    """After rounds with rejections, the head's q equals that of a fresh head fed the same text: the
    target's features and the head's own cache were rolled back to exactly the verified tokens."""
    target, drafter = head_drafter(tiny_target, untrained_head, vocab)
    sampling, generator = SamplingConfig(), torch.Generator().manual_seed(4)
    tokens, rejections = list(PROMPT), 0
    for trace in speculative_rounds(target, drafter, PROMPT, Settings(3, sampling, 30, adaptive=False),
                                    generator):
        tokens += trace.emitted_tokens
        rejections += trace.num_accepted < trace.num_drafted
        assert target.features.shape[0] == target.cache_length == len(tokens) - 1
        assert drafter.cache_length <= target.cache_length
        ahead = drafter.propose(tokens, 2, sampling, torch.Generator().manual_seed(9))
        fresh_target, fresh = head_drafter(tiny_target, untrained_head, vocab)
        fresh_target.extend(tokens[:-1])
        scratch = fresh.propose(tokens, 2, sampling, torch.Generator().manual_seed(9))
        assert ahead.tokens.tolist() == scratch.tokens.tolist()
        torch.testing.assert_close(ahead.probs, scratch.probs, atol=1e-4, rtol=1e-4)
        drafter.rollback(target.cache_length)  # what the round loop does after verification
    assert rejections > 0


def test_first_token_is_exactly_the_targets_over_every_draft_and_coin(tiny_target, untrained_head, vocab):
    """Enumerate the head's q (a reduced head: q = 0 off its tokens) against the target's p."""
    warp = SamplingConfig(temperature=1.0)
    target, drafter = head_drafter(tiny_target, untrained_head, vocab, token_ids=list(range(0, vocab, 3)))
    target.extend(PROMPT[:-1])
    q = drafter.propose(PROMPT, 1, warp, torch.Generator()).probs[0].double()
    p = warp_probs(CachedModel(tiny_target, vocab).extend(PROMPT)[-1:], warp)[0].double()
    p, q = p / p.sum(), q / q.sum()  # float32 sums are off by ~1e-8: renormalise in float64
    assert (q == 0).sum() > vocab // 2 and 0 < torch.minimum(p, q).sum() < 1  # partly overlapping
    torch.testing.assert_close(emitted_distribution(p, q), p, atol=1e-12, rtol=0)


@pytest.mark.slow  # thousands of sampled runs, ~8 s; the fast loop keeps the exact enumerations
@pytest.mark.parametrize("threshold", [None, 0.35], ids=["fixed", "adaptive 0.35"])
def test_short_continuations_with_the_head_match_the_target_distribution(tiny_target, tiny_head, vocab,
                                                                          threshold):
    """Sampled runs, rejections mid-round (features roll back), the law of the first three tokens."""
    warp = SamplingConfig(temperature=1.0, top_k=3)
    prompt = PROMPT[:3]
    exact = exact_target_law(tiny_target, vocab, prompt, warp, 3)
    counts, outcomes, samples = dict.fromkeys(exact, 0), set(), 2000
    settings = Settings(2, warp, 3, adaptive=threshold is not None, draft_threshold=threshold or 0.2)
    for seed in range(samples):
        target, drafter = head_drafter(tiny_target, tiny_head, vocab)
        traces = list(speculative_rounds(target, drafter, prompt, settings,
                                         torch.Generator().manual_seed(seed)))
        counts[tuple(emitted(traces))] += 1  # KeyError = a sequence the target cannot produce
        outcomes |= {(t.num_drafted, t.num_accepted, t.draft_stop) for t in traces}
    assert any(accepted < drafted for drafted, accepted, _ in outcomes)  # rejections happened
    if threshold:
        assert any(stop == STOP_CONFIDENCE for *_, stop in outcomes), outcomes
    keys = list(exact)
    total = sum(exact.values())
    result = chisquare([counts[k] for k in keys], [exact[k] / total * samples for k in keys])
    assert result.pvalue > 1e-3


@pytest.mark.slow  # the bundled target writes answers and reads them
def test_head_training_runs_end_to_end_and_the_result_loads(bundled_pair, tmp_path):
    config = HeadTrainingConfig(max_new_tokens=6, generation_batch=2, max_shards=1, feature_batch=2,
                                batch_size=2, minutes=5, max_steps=3, eval_every=2, eval_tokens=4)
    head_tokens = list(range(0, 49152, 7))
    target = bundled_pair.target
    card = train_head(target, target, head_tokens, tmp_path / "work", tmp_path / "head", config,
                      log=lambda _: None)
    assert card["steps"] == 3 and card["answers"] == 2
    assert sorted(p.name for p in (tmp_path / "work" / "data").iterdir()) == ["features-0000.pt",
                                                                              "shard-0000.pt"]
    assert [h["step"] for h in card["history"]] == [2, 3]
    assert 0 <= card["history"][-1]["code"]["agree_1_in_a_row"] <= 1
    assert (tmp_path / "head" / HEAD_WEIGHTS).stat().st_size < 15e6
    # Resumable, and what it wrote drafts next to the target it was trained for.
    more = train_head(target, target, head_tokens, tmp_path / "work", tmp_path / "head",
                      HeadTrainingConfig(**{**config.__dict__, "max_steps": 4}), log=lambda _: None)
    assert more["steps"] == 4 and len(more["history"]) == 3
    # The steps are the budget that ran out (not the 5 minutes): the 4th step, 3/4 of the way, is in the
    # last 30 %, where the rate falls: 1 - 0.9 * (0.75 - 0.7) / 0.3 of the peak.
    assert more["history"][-1]["learning_rate"] == pytest.approx(config.learning_rate * 0.85)
    pair = bundled_pair.with_drafter(str(tmp_path / "head"))
    assert pair.head is not None and pair.head.reduced.token_ids.tolist() == head_tokens
    ids = pair.encode_prompt("def add(a, b):", chat=False, max_new_tokens=6)
    assert len(generate(pair, ids, Settings(max_new_tokens=6)).token_ids) == 6
    with pytest.raises(SpecDecError, match="another shape"):  # a 2-layer head cannot resume a 1-layer one
        train_head(target, target, head_tokens, tmp_path / "work", tmp_path / "head",
                   HeadTrainingConfig(**{**config.__dict__, "layers": 2, "max_steps": 5}), log=lambda _: None)
    # Started from the shipped draft's layers, in a work folder of its own: it drafts too.
    draft = HeadTrainingConfig(**{**config.__dict__, "layers": 2, "start_from_draft": True,
                                  "warmup_steps": 2})
    train_head(target, target, head_tokens, tmp_path / "work-draft", tmp_path / "head-draft", draft,
               log=lambda _: None, draft_layers=load_file(SHIPPED_DRAFT / SHIPPED_DRAFT_WEIGHTS))
    pair = bundled_pair.with_drafter(str(tmp_path / "head-draft"))
    assert pair.head.head.feature_norm is not None and len(pair.head.head.decoder.layers) == 2
    assert len(generate(pair, ids, Settings(max_new_tokens=6)).token_ids) == 6


@pytest.mark.slow  # the bundled target answers greedily, and the shipped head is read
def test_the_shipped_head_trains_on_from_the_greedy_campaign(bundled_pair, tmp_path, monkeypatch):
    answers_dir, features_dir = tmp_path / "greedy", tmp_path / "features"
    run_campaign(bundled_pair.target, answers_dir, features_dir, total_answers=2, batch=2, max_new_tokens=6,
                 greedy=True)
    monkeypatch.setattr(head_training, "campaign_answers_folder", lambda greedy: answers_dir)
    monkeypatch.setattr(head_training, "campaign_features_folder", lambda greedy: features_dir)
    head_tokens = json.loads((SHIPPED_HEAD / HEAD_TOKENS).read_text())
    shipped = load_file(SHIPPED_HEAD / HEAD_WEIGHTS)
    # At learning rate 0 a head started from the shipped one writes the shipped weights back.
    config = HeadTrainingConfig(campaign=True, greedy=True, start_from_head=True, learning_rate=0.0,
                                batch_size=2, max_steps=1, eval_every=1, eval_tokens=4)
    card = train_head(bundled_pair.target, bundled_pair.target, head_tokens, tmp_path / "work",
                      tmp_path / "head", config, log=lambda _: None)
    assert card["answers"] == 2 and card["config"]["layers"] == 2
    written = load_file(tmp_path / "head" / HEAD_WEIGHTS)
    assert written.keys() == shipped.keys() and all(torch.equal(written[k], shipped[k]) for k in shipped)
    # Negative control: one step at a learning rate above 0 moves it off the shipped weights.
    train_head(bundled_pair.target, bundled_pair.target, head_tokens, tmp_path / "work-moved",
               tmp_path / "moved", replace(config, learning_rate=1e-3), log=lambda _: None)
    moved = load_file(tmp_path / "moved" / HEAD_WEIGHTS)
    assert not all(torch.equal(moved[k], shipped[k]) for k in shipped)
    # --start-head-folder starts from that head instead: at learning rate 0 it writes the moved weights.
    train_head(bundled_pair.target, bundled_pair.target, head_tokens, tmp_path / "work-from-moved",
               tmp_path / "from-moved", replace(config, start_head_folder=str(tmp_path / "moved")),
               log=lambda _: None)
    from_moved = load_file(tmp_path / "from-moved" / HEAD_WEIGHTS)
    assert all(torch.equal(from_moved[k], moved[k]) for k in moved)
    with pytest.raises(SpecDecError, match="no saved head"):
        train_head(bundled_pair.target, bundled_pair.target, head_tokens, tmp_path / "work-none",
                   tmp_path / "none", replace(config, start_head_folder=str(tmp_path / "absent")),
                   log=lambda _: None)


def test_a_head_reads_the_targets_earlier_layers_only_where_the_target_read(tiny_target, vocab, tmp_path):
    """EAGLE-3's extra inputs (experiments/head_layers.py): the target's hidden states after chosen layers.
    Their projection starts at zero (the head drafts as before); zeros, what drafted positions get, add
    nothing."""
    ids = torch.tensor(PROMPT)
    final, layer_1 = target_layer_features(tiny_target, [ids], [1])[0]
    with torch.no_grad():
        hidden = tiny_target.model(input_ids=ids[None], output_hidden_states=True).hidden_states
    torch.testing.assert_close(final, target_features(tiny_target, [ids])[0])
    torch.testing.assert_close(layer_1, hidden[1][0].to(torch.bfloat16))  # layer 1's output, not the input
    assert not torch.equal(layer_1, hidden[0][0].to(torch.bfloat16))

    plain = build_head(tiny_target, layers=1)
    plain.config.feature_layers = [1]
    reading = FeatureHead(plain.config)
    reading.load_state_dict(plain.state_dict(), strict=False)
    example = FeatureExample(ids, final, 2, layer_features=layer_1)
    batch = make_batch([example], tiny_target.get_input_embeddings())
    with torch.no_grad():
        reading.layer_fc.weight.zero_()
        without = plain(batch.embeddings, batch.features)
        torch.testing.assert_close(reading(batch.embeddings, batch.features,
                                           layer_features=batch.layer_features), without)
        reading.layer_fc.weight.normal_(std=0.5)
        torch.testing.assert_close(reading(batch.embeddings, batch.features,
                                           layer_features=torch.zeros_like(batch.layer_features)), without)
        assert not torch.allclose(reading(batch.embeddings, batch.features,
                                          layer_features=batch.layer_features), without, atol=1e-3)  # read

    seen = []  # the layers each unrolled step gets: all positions first, then the first (the target's) only
    real_forward = reading.forward

    def recording_forward(*args, **kwargs):
        seen.append(kwargs["layer_features"])
        return real_forward(*args, **kwargs)

    reading.forward = recording_forward
    with torch.no_grad():
        unrolled_predictions(reading, batch, unroll=3)
    assert torch.equal(seen[0], batch.layer_features)
    for later in seen[1:]:
        assert torch.equal(later[:, 0], batch.layer_features[:, 0]) and not later[:, 1:].any()

    reading.config.to_json_file(tmp_path / "config.json")  # the engine does not pass them: refused, clearly
    with pytest.raises(SpecDecError, match=r"reads the target's layers \[1\]"):
        load_head(str(tmp_path), LoadedModel("tiny", tiny_target, None))
