"""Training the draft end to end on a tiny budget, and the pieces it is made of."""

import ast
import json

import pytest
import torch
from tiny_models import tiny_model

from specdec.config import DraftTrainingConfig
from specdec.errors import SpecDecError
from specdec.paths import HELD_OUT_PROMPT_SETS
from specdec.training.data import Example, label_answers, stdlib_code_blocks, training_prompts
from specdec.training.losses import cross_entropy, total_variation
from specdec.training.train_draft import (
    build_draft,
    distillation_loss,
    grown,
    learning_rate_factor,
    start_as_identity,
    train_draft,
    trainable_state,
)


def test_evaluation_prompts_are_not_training_prompts():
    train = set(training_prompts())
    for path in HELD_OUT_PROMPT_SETS.values():
        assert not train & set(json.loads(path.read_text())["prompts"])


def test_draft_shares_frozen_embeddings_and_starts_from_target_layers(tiny_target):
    draft = build_draft(tiny_target, layers=1)
    assert torch.equal(draft.model.embed_tokens.weight, tiny_target.model.embed_tokens.weight)
    assert draft.lm_head.weight is draft.model.embed_tokens.weight  # tied
    assert not draft.model.embed_tokens.weight.requires_grad
    first_layer = tiny_target.model.layers[0].mlp.up_proj.weight
    assert torch.equal(draft.model.layers[0].mlp.up_proj.weight, first_layer)


def test_loss_is_lower_when_draft_matches_labels(tiny_target):
    """Labels taken from the draft itself score better than labels from a different distribution."""
    draft = build_draft(tiny_target, layers=1)
    ids = torch.tensor([5, 6, 7, 8, 9, 10])
    with torch.no_grad():
        probs = torch.softmax(draft(ids[None]).logits[0, 2:-1].float(), -1)
    top_probs, top_ids = probs.topk(8, -1)
    own = Example(ids, 3, top_ids, top_probs.half())
    shuffled = Example(ids, 3, top_ids.flip(0), top_probs.half())
    assert distillation_loss(draft, [own]) < distillation_loss(draft, [shuffled])


def test_argmax_weight_moves_the_label_onto_the_target_top_token(tiny_target):
    """Weight 1 is cross-entropy on the target's top token alone; in between, the mix of the two losses."""
    draft = build_draft(tiny_target, layers=1)
    ids = torch.tensor([5, 6, 7, 8, 9, 10])
    top_probs = torch.tensor([[0.5, 0.3, 0.2]] * 3).half()
    top_ids = torch.tensor([[11, 12, 13], [14, 15, 16], [17, 18, 19]])
    example = Example(ids, 3, top_ids, top_probs)
    one_hot = Example(ids, 3, top_ids, torch.tensor([[1.0, 0.0, 0.0]] * 3).half())

    def loss(e: Example, weight: float) -> float:  # the same sampled candidates every call
        return distillation_loss(draft, [e], generator=torch.Generator().manual_seed(0),
                                 argmax_weight=weight).item()

    assert loss(example, 1.0) == pytest.approx(loss(one_hot, 0.0))
    assert loss(example, 0.0) != pytest.approx(loss(one_hot, 0.0))
    assert loss(example, 0.25) == pytest.approx(0.75 * loss(example, 0.0) + 0.25 * loss(example, 1.0))
    with pytest.raises(SpecDecError, match="argmax-weight"):
        DraftTrainingConfig(argmax_weight=1.5)


def test_the_tvd_loss_is_one_minus_the_overlap_on_an_enumerated_example():
    """½ Σ |p - q| = 1 - Σ min(p, q), the chance a draft is rejected at T = 1; KL is another number."""
    target_probs = torch.tensor([[0.5, 0.3, 0.2, 0.0], [0.25, 0.25, 0.25, 0.25]])
    draft_probs = torch.tensor([[0.2, 0.3, 0.4, 0.1], [0.25, 0.25, 0.25, 0.25]])
    # Row 1: min = 0.2 + 0.3 + 0.2 + 0 = 0.7, so 0.3; row 2: q = p, so 0. Mean 0.15.
    assert total_variation(target_probs, draft_probs.log()).item() == pytest.approx(0.15)
    assert total_variation(target_probs, draft_probs.log()).item() == pytest.approx(
        (target_probs - draft_probs).abs().sum(-1).mean().item() / 2)
    assert cross_entropy(target_probs, draft_probs.log()).item() != pytest.approx(0.15)


def test_the_tvd_gradient_raises_q_only_where_it_falls_short_of_p():
    target_probs = torch.tensor([[0.6, 0.3, 0.1, 0.0]])
    logits = torch.zeros(1, 4, requires_grad=True)  # q uniform: short of p on tokens 0 and 1
    total_variation(target_probs, torch.log_softmax(logits, -1)).backward()
    assert (logits.grad[0, :2] < 0).all() and (logits.grad[0, 2:] > 0).all()  # descent raises 0, 1
    # Gradient descent brings q close to p (0.4 -> below 0.05; the loss has a kink at q = p, so a fixed
    # step ends up hopping about it rather than settling).
    for _ in range(100):
        logits.grad = None
        loss = total_variation(target_probs, torch.log_softmax(logits, -1))
        loss.backward()
        with torch.no_grad():
            logits -= 0.5 * logits.grad
    assert loss.item() < 0.05


def test_the_draft_tvd_loss_is_one_minus_its_full_overlap_with_the_label():
    """With every token a candidate (a 300-token model, 100,000 random negatives), the sampled softmax is
    the full one: the loss is 1 - Σ min(p, q) with p the renormalised label and q the draft's softmax."""
    draft = build_draft(tiny_model(300, seed=0), layers=1)
    ids = torch.tensor([5, 6, 7, 8, 9, 10])
    top_ids = torch.tensor([[11, 12, 13], [14, 15, 16], [17, 18, 19]])
    top_probs = torch.tensor([[0.5, 0.3, 0.1], [0.4, 0.2, 0.2], [0.9, 0.05, 0.05]])
    example = Example(ids, 3, top_ids, top_probs.half())
    with torch.no_grad():
        draft_probs = torch.softmax(draft(ids[None]).logits[0, 2:-1].float(), -1)  # (3, 300)
    label = top_probs.half().float() / top_probs.half().float().sum(-1, keepdim=True)
    expected = 1 - torch.minimum(label, draft_probs.gather(1, top_ids)).sum(-1).mean()

    def loss(kind: str) -> float:
        return distillation_loss(draft, [example], negatives=100_000, loss=kind,
                                 generator=torch.Generator().manual_seed(0)).item()

    assert loss("tvd") == pytest.approx(expected.item(), abs=1e-5)
    assert loss("kl") == pytest.approx(-(label * draft_probs.gather(1, top_ids).log()).sum(-1).mean().item(),
                                       abs=1e-4)
    assert loss("mix") == pytest.approx((loss("tvd") + loss("kl")) / 2, abs=1e-5)
    with pytest.raises(SpecDecError, match="loss must be one of kl, tvd, mix"):
        DraftTrainingConfig(loss="js")
    with pytest.raises(SpecDecError, match="--greedy-answers"):
        DraftTrainingConfig(campaign=True, greedy=True, greedy_answers=64)


def test_a_grown_draft_starts_by_computing_what_the_trained_one_did(tiny_target):
    trained = build_draft(tiny_target, layers=2)
    torch.nn.init.normal_(trained.model.layers[1].mlp.up_proj.weight)  # its own, not the target's
    layers, new_layers = grown(trainable_state(trained), 4)
    assert new_layers == [1, 2] and grown(trainable_state(trained), 2)[1] == []
    deeper = build_draft(tiny_target, layers=4)
    deeper.load_state_dict(layers, strict=False)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        # Negative control: the new layers as built (the target's) change what the draft computes.
        assert not torch.allclose(deeper(ids).logits, trained(ids).logits, atol=1e-4)
        for i in new_layers:
            start_as_identity(deeper.model.layers[i])
        assert torch.allclose(deeper(ids).logits, trained(ids).logits, atol=1e-4)
    assert torch.equal(deeper.model.layers[3].mlp.up_proj.weight, trained.model.layers[1].mlp.up_proj.weight)


@pytest.mark.slow  # makes data and trains for a few steps
def test_training_runs_end_to_end_on_a_tiny_budget(bundled_pair, tmp_path):
    config = DraftTrainingConfig(layers=1, samples_per_prompt=1, max_new_tokens=6, generation_batch=2,
                                 batch_size=2, minutes=5, max_steps=3, eval_every=2, eval_tokens=4,
                                 max_shards=1, stdlib_blocks=3, stdlib_batch=2, stdlib_max_tokens=8)
    card = train_draft(bundled_pair.target, tmp_path / "work", tmp_path / "draft", config, log=lambda _: None)
    assert card["steps"] == 3 and card["answers"] == 2 + 3  # 2 sampled answers, 3 stdlib blocks
    assert sorted(p.name for p in (tmp_path / "work" / "data").iterdir()) == [
        "shard-0000.pt", "stdlib-0000.pt", "stdlib-0001.pt"]
    assert [h["step"] for h in card["history"]] == [0, 2, 3]  # 0: the draft before training
    assert 0 <= card["history"][-1]["code"]["sum_min_pq"] <= 1
    # Read along the target's sampled answers too (what T = 1 drafting meets), and those are other text.
    assert set(card["history"][-1]) >= {"code", "code sampled", "prose", "prose sampled"}
    eval_sets = torch.load(tmp_path / "work" / "eval-4.pt", weights_only=False)
    assert any(not torch.equal(g, s) for g, s in zip(eval_sets["code"].sequences,
                                                     eval_sets["code sampled"].sequences, strict=True))
    assert (tmp_path / "draft" / "draft-layers.safetensors").exists()
    # Resumable: a second call with a larger step budget continues from the checkpoint.
    more = train_draft(bundled_pair.target, tmp_path / "work", tmp_path / "draft",
                       DraftTrainingConfig(**{**config.__dict__, "max_steps": 4}), log=lambda _: None)
    assert more["steps"] == 4 and len(more["history"]) == 4
    # The steps are the budget that ran out (not the 5 minutes): the 4th step, 3/4 of the way, is in the
    # last 30 %, where the rate falls: 1 - 0.9 * (0.75 - 0.7) / 0.3 of the peak.
    assert more["history"][-1]["learning_rate"] == pytest.approx(config.learning_rate * 0.85)


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_stdlib_blocks_are_whole_functions_and_classes():
    blocks = stdlib_code_blocks(60)
    assert len(blocks) == 60 and blocks == stdlib_code_blocks(60)  # a fixed sample
    assert all(source.startswith(("def ", "class ")) for _, source in blocks)
    assert not any(module.split(".")[0] in ("test", "idlelib") for module, _ in blocks)
    parsed = 0
    for _, source in blocks:
        try:
            ast.parse(source)
            parsed += 1
        except SyntaxError:  # a block whose string literal has an unindented line is cut short
            pass
    assert parsed >= 0.9 * len(blocks)


@pytest.mark.slow
def test_label_answers_is_the_targets_own_distribution(bundled_pair):
    """Batched, right-padded teacher forcing gives what one unpadded forward pass gives."""
    target = bundled_pair.target
    prompts, answers = ["Say hi.", "Show me some code."], ["Hi there!", "```python\nprint(1 + 2)\n```"]
    examples = label_answers(target, prompts, answers, max_tokens=32, top_k=5)
    for example, answer in zip(examples, answers, strict=True):
        answer_ids = target.tokenizer(answer, add_special_tokens=False)["input_ids"]
        assert example.token_ids[example.answer_start:].tolist() == answer_ids
        with torch.inference_mode():
            logits = target.model(example.token_ids[None]).logits[0, example.answer_start - 1 : -1]
        probs = torch.softmax(logits[:, : target.vocab_size].float(), -1)
        assert torch.equal(example.top_ids[:, 0], probs.argmax(-1))
        torch.testing.assert_close(example.top_probs.float(), probs.gather(1, example.top_ids),
                                   atol=2e-2, rtol=0)


def test_learning_rate_is_constant_then_falls_to_a_tenth():
    assert learning_rate_factor(0.0, 0.3) == learning_rate_factor(0.7, 0.3) == 1.0
    assert abs(learning_rate_factor(0.85, 0.3) - 0.55) < 1e-9
    assert abs(learning_rate_factor(1.0, 0.3) - 0.1) < 1e-9
    assert learning_rate_factor(0.99, 0.0) == 1.0  # no decay asked for
