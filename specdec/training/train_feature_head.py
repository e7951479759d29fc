"""Train the bundled target's feature head (core.feature_head), offline, on a CPU.

Data: the target's own answers to the draft's training prompts (training.data), and the target's last
hidden state at every position of them, computed once by teacher forcing (one batched forward pass per
shard); or, with --campaign, the data campaign's answers, sampled or (--greedy) greedy, with the
features kept while the target wrote them (training.campaign). Training then never runs the target.
With --start-from-head it trains the shipped head on.

Loss, at every answer position and for each of `unroll` drafting steps:
  cross-entropy between the target's p (from its feature, over the head's tokens) and the head's q,
  plus a small regression of the predicted feature onto the target's.
Step 1 reads the target's features, as the first draft of a round does. Step j reads the head's own
step j-1 predictions instead, as the j-th draft does ("training-time test": EAGLE-3 reports that a
head trained on the target's features alone drifts after its first draft). (In an unrolled step the earlier
positions, too, hold predicted features, where drafting would have the target's: a harder task.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch.nn.utils.rnn import pad_sequence
from tqdm import tqdm
from transformers import LlamaConfig, LlamaForCausalLM

from specdec.config import HeadTrainingConfig
from specdec.core.feature_head import FeatureHead, head_config
from specdec.errors import SpecDecError
from specdec.models.feature_head_files import HEAD_WEIGHTS, SHIPPED_HEAD, save_head
from specdec.models.loading import LoadedModel, cpu_has_native_bf16
from specdec.paths import HELD_OUT_PROMPT_SETS
from specdec.training.campaign import (
    campaign_answers_folder,
    campaign_command,
    campaign_features_folder,
    load_campaign,
)
from specdec.training.data import Example, make_shards, right_padded, write_shards
from specdec.training.features import target_features, target_layer_features
from specdec.training.losses import sampled_candidates
from specdec.training.train_draft import (
    budget_spent,
    draw_batch,
    draw_weights,
    greedy_answer,
    learning_rate_factor,
    shard_progress,
    warmed_up,
)


@dataclass
class FeatureExample:
    """One sequence with the target's last hidden state at each of its positions."""

    token_ids: torch.Tensor  # (length,)
    features: torch.Tensor  # (length, hidden), bf16
    answer_start: int  # first answer position
    kind: str = ""  # the campaign's kind of prompt (code, prose, ...), where known
    layer_features: torch.Tensor | None = None  # (length, layers * hidden), bf16: for a head that reads them


def make_feature_shards(target: LoadedModel, answer_shards: list[Path], batch_size: int, bf16: bool,
                        progress=None) -> list[Path]:
    """features-NNNN.pt next to each answer shard; existing ones are kept (resume)."""

    def featured(index: int) -> list[FeatureExample]:
        examples: list[Example] = torch.load(answer_shards[index], weights_only=False)
        out = []
        for start in range(0, len(examples), batch_size):
            group = examples[start : start + batch_size]
            features = target_features(target.model, [e.token_ids for e in group], bf16)
            out += [FeatureExample(e.token_ids, f, e.answer_start)
                    for e, f in zip(group, features, strict=True)]
        return out

    paths = [path.with_name(path.name.replace("shard-", "features-")) for path in answer_shards]
    return write_shards(paths, featured, progress)


@dataclass
class Batch:
    """Right-padded sequences, and where the loss counts: positions i whose f_{i+1} is an answer's."""

    embeddings: torch.Tensor  # (B, W - 1, hidden): the embedding of x_{i+1} for position i
    features: torch.Tensor  # (B, W - 1, hidden): f_i
    next_features: torch.Tensor  # (B, W - 1, hidden): f_{i+1}, what position i predicts
    attention_mask: torch.Tensor  # (B, W - 1)
    loss_mask: torch.Tensor  # (B, W - 1) bool
    layer_features: torch.Tensor | None = None  # (B, W - 1, layers * hidden): at position i, for a
    # head that reads the target's earlier layers too


def make_batch(examples: list[FeatureExample], embed: torch.nn.Embedding) -> Batch:
    ids, mask = right_padded([e.token_ids for e in examples])
    features = pad_sequence([e.features.float() for e in examples], batch_first=True)
    loss_mask = torch.zeros(len(examples), ids.shape[1] - 1, dtype=torch.bool)
    for row, e in enumerate(examples):
        # Position i predicts f_{i+1}, which gives p for x_{i+2}: count those that predict answer tokens.
        loss_mask[row, max(e.answer_start - 2, 0) : len(e.token_ids) - 1] = True
    device = embed.weight.device  # examples are stored on the CPU; a step runs where the target does
    with torch.no_grad():
        embeddings = embed(ids[:, 1:].to(device))
    layer_features = None
    if examples[0].layer_features is not None:
        layer_features = pad_sequence([e.layer_features.float() for e in examples],
                                      batch_first=True)[:, :-1].to(device)
    features = features.to(device)
    return Batch(embeddings, features[:, :-1], features[:, 1:], mask[:, 1:].to(device), loss_mask.to(device),
                 layer_features)


def unrolled_predictions(head: FeatureHead, batch: Batch, unroll: int) -> list[torch.Tensor]:
    """The head's predicted features for drafting steps 1..unroll (see the module's docstring)."""
    predictions, features, layer_features = [], batch.features, batch.layer_features
    for _ in range(unroll):
        predicted = head(batch.embeddings, features, attention_mask=batch.attention_mask,
                         layer_features=layer_features)
        predictions.append(predicted)
        # Position i's next input: the prediction of f_i, made at position i - 1.
        features = torch.cat([batch.features[:, :1], predicted[:, :-1]], dim=1)
        if layer_features is not None:  # the target's layers only where the target read: the first
            layer_features = torch.cat([batch.layer_features[:, :1],
                                        torch.zeros_like(batch.layer_features[:, 1:])], dim=1)
    return predictions


def head_loss(head: FeatureHead, batch: Batch, output_rows: torch.Tensor, unroll: int,
              feature_weight: float, label_top_k: int = 32, negatives: int = 2048,
              generator: torch.Generator | None = None) -> torch.Tensor:
    """Mean over drafting steps of CE(p, q) + feature_weight * SmoothL1(predicted, target feature).

    p is the target's top `label_top_k` tokens, renormalised; q's softmax runs over a candidate set:
    every token in those top lists anywhere in the batch, plus `negatives` random ones from the head's
    tokens (a sampled softmax, as the draft's training uses: several times cheaper on a CPU).
    Evaluation always uses the head's whole token list.
    """
    wanted = batch.next_features[batch.loss_mask]
    with torch.no_grad():
        top_probs, top_ids = torch.softmax(wanted @ output_rows.T, dim=-1).topk(label_top_k, dim=-1)
        top_probs = top_probs / top_probs.sum(-1, keepdim=True)
        candidates, label_columns = sampled_candidates(top_ids, output_rows.shape[0], negatives, generator)
    candidate_rows = output_rows[candidates]
    total = 0.0
    for predicted in unrolled_predictions(head, batch, unroll):
        mine = predicted[batch.loss_mask].float()
        log_q = torch.log_softmax(mine @ candidate_rows.T, dim=-1)
        cross_entropy = -(top_probs * log_q.gather(1, label_columns)).sum(-1).mean()
        total = total + cross_entropy + feature_weight * F.smooth_l1_loss(mine, wanted)
    return total / unroll


def head_step(head: FeatureHead, optimizer: torch.optim.Optimizer, batch: Batch, output_rows: torch.Tensor,
              learning_rate: float, unroll: int, feature_weight: float, generator: torch.Generator | None,
              bf16: bool = False) -> float:
    """One optimiser step on `batch` at `learning_rate` (gradients clipped to norm 1): the loss."""
    for group in optimizer.param_groups:
        group["lr"] = learning_rate
    with torch.autocast(output_rows.device.type, torch.bfloat16, enabled=bf16):
        loss = head_loss(head, batch, output_rows, unroll, feature_weight, generator=generator)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
    optimizer.step()
    return loss.item()


@torch.inference_mode()
def evaluate_head(head: FeatureHead, examples: list[FeatureExample], embed, output_rows: torch.Tensor,
                  unroll: int) -> dict[str, float]:
    """On the target's greedy answers to held-out prompts: Σ min(p, q) at the first draft, and the
    share of positions whose drafts 1..j all match the target's argmax, for j = 1..unroll."""
    overlap, count = 0.0, 0
    chained = torch.zeros(unroll)
    for e in examples:
        batch = make_batch([e], embed)
        predictions = unrolled_predictions(head, batch, unroll)
        wanted = batch.next_features[batch.loss_mask]
        p = torch.softmax(wanted @ output_rows.T, -1)
        chain = None  # at position i: drafts 1..j of the round that read the target at i - j + 1 all match
        for step, predicted in enumerate(predictions):
            q = torch.softmax(predicted[batch.loss_mask].float() @ output_rows.T, -1)
            if step == 0:
                overlap += torch.minimum(p, q).sum().item()
            agree = p.argmax(-1) == q.argmax(-1)
            # Draft j at position i counts if drafts 1..j-1, made at positions i-j+1..i-1, matched too.
            chain = agree if chain is None else agree & torch.cat(
                [torch.zeros(1, dtype=torch.bool, device=chain.device), chain[:-1]])
            chained[step] += chain.sum().item()
        count += len(wanted)
    figures = {"sum_min_pq": overlap / count}
    figures |= {f"agree_{j + 1}_in_a_row": float(chained[j]) / count for j in range(unroll)}
    return figures


def make_eval_features(target: LoadedModel, prompts: list[str], tokens: int, layers: Sequence[int] = ()
                       ) -> list[FeatureExample]:
    """The target's greedy answers to held-out prompts, with its features (and its `layers`, if any)."""
    examples = []
    for prompt in prompts:
        sequence, start = greedy_answer(target, prompt, tokens)
        if layers:
            features, chosen = target_layer_features(target.model, [sequence], layers)[0]
        else:
            features, chosen = target_features(target.model, [sequence])[0], None
        examples.append(FeatureExample(sequence, features, start, layer_features=chosen))
    return examples


def held_out_eval_sets(target: LoadedModel, folder: Path, tokens: int, layers: Sequence[int] = ()
                       ) -> dict[str, list[FeatureExample]]:
    """Every held-out kind (code, structured, prose, math, questions, summaries): the target's greedy
    answers of `tokens` tokens with its features (and its `layers`), made once per folder and read back."""
    with_layers = f"-layers-{'-'.join(map(str, layers))}" if layers else ""
    path = folder / f"eval-{tokens}-{'-'.join(HELD_OUT_PROMPT_SETS)}{with_layers}.pt"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        torch.save({name: make_eval_features(target, json.loads(prompts.read_text())["prompts"], tokens,
                                             layers) for name, prompts in HELD_OUT_PROMPT_SETS.items()}, path)
    return torch.load(path, weights_only=False)


def build_head(target: LlamaForCausalLM, layers: int, draft_layers: dict[str, torch.Tensor] | None = None
               ) -> FeatureHead:
    """Layers start as copies of the target's last ones, and fc starts by passing the feature through.

    Or, given a trained draft's layers (`draft_layers`: its state dict, the draft's depth), they start
    as the draft's, reading the token's embedding plus fc(feature), with fc at zero: the head then
    begins as that draft, drafting from the text alone (the draft's layers read embeddings, and its
    output head is the target's, tied), and training teaches it to read the target's features as well.
    """
    hidden = target.config.hidden_size
    config = head_config(target.config, layers)
    config.feature_norm = config.fuse_by_adding = draft_layers is not None
    head = FeatureHead(config).float()
    if draft_layers is None:
        for layer, source in zip(head.decoder.layers, target.model.layers[-layers:], strict=True):
            layer.load_state_dict(source.state_dict())
        head.decoder.norm.load_state_dict(target.model.norm.state_dict())
    else:
        state = {k.removeprefix("model."): v.float() for k, v in draft_layers.items()
                 if k.startswith(("model.layers.", "model.norm."))}  # not its token table or output head
        loaded = head.decoder.load_state_dict(state, strict=False)
        if loaded.unexpected_keys or set(loaded.missing_keys) != {"embed_tokens.weight"}:  # unused table
            raise SpecDecError(f"the draft's layers do not fit a {layers}-layer head: "
                               f"{(loaded.unexpected_keys or loaded.missing_keys)[:3]}")
        # The feature, normalised, enters at the embeddings' scale (a fixed one): the target's features
        # are ~15 times larger, and a fused input that large would drown the tokens the layers read.
        with torch.no_grad():
            embeddings = target.get_input_embeddings().weight
            head.feature_norm.weight.fill_(embeddings.float().pow(2).mean(-1).sqrt().mean().item())
        head.feature_norm.requires_grad_(False)
    with torch.no_grad():  # from a draft fc(feature) starts at zero, the embedding added as it is
        head.fc.weight.zero_()
        head.fc.bias.zero_()
        if draft_layers is None:
            head.fc.weight[:, hidden:] = torch.eye(hidden)  # fc's input is [embedding ; feature]
    return head


def check_saved_head(folder: Path) -> None:
    if not (folder / HEAD_WEIGHTS).is_file() or not (folder / "config.json").is_file():
        raise SpecDecError(f"no saved head in {folder}: a head folder holds {HEAD_WEIGHTS} and config.json")


def saved_head(layers: Sequence[int] = (), extra_decoder_layers: int = 0,
               folder: Path = SHIPPED_HEAD) -> FeatureHead:
    """A saved head (the shipped one, or another `folder` that train-head wrote) in fp32, to train on
    from; with `layers`, also reading those of the target's layers (their projection at zero), with
    `extra_decoder_layers`, that many more decoder layers (their output projections at zero): either way
    it drafts exactly as the saved head until trained."""
    check_saved_head(folder)
    config = LlamaConfig.from_json_file(folder / "config.json")
    if layers:
        config.feature_layers = list(layers)
    saved_depth = config.num_hidden_layers
    config.num_hidden_layers += extra_decoder_layers
    head = FeatureHead(config).float()
    saved = load_file(folder / HEAD_WEIGHTS)
    head.load_state_dict({k: v.float() for k, v in saved.items()}, strict=False)
    if layers:
        with torch.no_grad():
            head.layer_fc.weight.zero_()
            head.layer_norm.weight.copy_(head.feature_norm.weight)  # the embeddings' scale, as the feature's
    with torch.no_grad():  # a residual layer whose attention and MLP write nothing passes its input on
        for layer in head.decoder.layers[saved_depth:]:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    for norm in (head.feature_norm, head.layer_norm):
        if norm is not None:
            norm.requires_grad_(False)  # fixed scales, as the saved head's
    return head


def campaign_feature_examples(greedy: bool, answers: int = 0) -> list[FeatureExample]:
    """The campaign's first `answers` answers (0: all), sampled or greedy, with their features."""
    campaign = load_campaign(campaign_answers_folder(greedy), campaign_features_folder(greedy), answers)
    examples = [FeatureExample(a.token_ids, a.features, a.answer_start, a.kind) for a in campaign]
    if not examples or (answers and len(examples) < answers):
        raise SpecDecError(f"the campaign has {len(examples)} answers with features, fewer than asked: "
                           f"run `{campaign_command(greedy)}` first (it also fills in missing features)")
    return examples


def train_head(teacher: LoadedModel, target: LoadedModel, head_token_ids: list[int], work_folder: Path,
               output_folder: Path, config: HeadTrainingConfig, log=print,
               draft_layers: dict[str, torch.Tensor] | None = None) -> dict:
    """Make data and features (resumable), train for the time budget (resumable), write the head.

    `teacher` writes the answers (the target, maybe in bf16: faster, and any fluent answers will do);
    `target` is the model the head will draft for: its features are what the head learns to read.
    `draft_layers`: a trained draft's layers to start from (see build_head).
    """
    start_folder = Path(config.start_head_folder) if config.start_head_folder else SHIPPED_HEAD
    if config.start_from_head:
        check_saved_head(start_folder)  # before the data and the features are loaded, not after
    torch.manual_seed(0)
    work_folder.mkdir(parents=True, exist_ok=True)
    bf16 = target.device.type == "cuda" or cpu_has_native_bf16()  # forward passes in bf16; weights stay fp32

    if config.campaign:
        examples = campaign_feature_examples(config.greedy, config.answers)
    else:
        bar, progress = shard_progress("target answers (data)")
        with bar:
            answers = make_shards(teacher, work_folder / "data", 1, config.generation_batch,
                                  config.max_new_tokens, 1, config.max_shards, progress)
        bar, progress = shard_progress("target features (teacher forcing)")
        with bar:
            feature_shards = make_feature_shards(target, answers, config.feature_batch, bf16, progress)
        examples = [e for path in feature_shards for e in torch.load(path, weights_only=False)]
    positions = sum(len(e.token_ids) - e.answer_start for e in examples)
    log(f"data: {len(examples)} answers, {positions} answer positions")

    eval_sets = held_out_eval_sets(target, work_folder, config.eval_tokens)

    embed = target.model.get_input_embeddings()
    output_rows = target.model.get_output_embeddings().weight.detach()[head_token_ids].float()
    if config.start_from_head:
        head = saved_head(folder=start_folder)
        config = replace(config, layers=head.config.num_hidden_layers)  # as the card should say
    else:
        head = build_head(target.model, config.layers, draft_layers)
    head = head.to(target.device)  # trained where the target runs, as its features are
    head.train()
    trained = [p for p in head.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=config.learning_rate, weight_decay=0.0)
    checkpoint_path = work_folder / "checkpoint.pt"
    state = {"step": 0, "seconds": 0.0, "history": []}
    if checkpoint_path.exists():
        checkpoint = torch.load(checkpoint_path, weights_only=False, map_location=target.device)
        try:
            head.load_state_dict(checkpoint["head"])
            optimizer.load_state_dict(checkpoint["optimizer"])
        except (RuntimeError, ValueError) as error:
            raise SpecDecError(f"{checkpoint_path} holds a head of another shape (--layers, "
                               "--start-from-draft): resume with its settings, or pass another --work-dir"
                               ) from error
        state = checkpoint["state"]
        log(f"resumed at step {state['step']} ({state['seconds'] / 60:.1f} min trained)")

    order = torch.Generator().manual_seed(state["step"])
    weights = draw_weights(examples, config.code_share)

    def progress() -> float:
        return budget_spent(state, config.minutes, config.max_steps)

    with tqdm(total=100, initial=int(100 * progress()), desc="training", unit="%") as bar:
        while progress() < 1:
            start = time.perf_counter()
            batch = make_batch([examples[i] for i in draw_batch(weights, len(examples), config.batch_size,
                                                                 order)], embed)
            # A linear rise over the warm-up steps (Adam's first steps move every weight by about the
            # rate, enough to undo a trained start), then a fall to 10 % over the budget's last 30 %.
            warmup = warmed_up(state["step"], config.warmup_steps)
            decay = learning_rate_factor(progress(), 0.3)
            loss = head_step(head, optimizer, batch, output_rows, config.learning_rate * warmup * decay,
                             config.unroll, config.feature_weight, order, bf16)
            state["step"] += 1
            state["seconds"] += time.perf_counter() - start
            bar.update(int(100 * progress()) - bar.n)
            bar.set_postfix(step=state["step"], loss=f"{loss:.3f}")
            finished = progress() >= 1
            if state["step"] % config.eval_every == 0 or finished:
                head.eval()
                scores = {name: evaluate_head(head, s, embed, output_rows, config.unroll)
                          for name, s in eval_sets.items()}
                head.train()
                state["history"].append({"step": state["step"], "minutes": state["seconds"] / 60,
                                         "learning_rate": optimizer.param_groups[0]["lr"],
                                         "loss": loss, **scores})
                last = f"agree_{config.unroll}_in_a_row"
                log(f"step {state['step']}: loss {loss:.3f} " + " ".join(
                    f"{n}: Σmin {s['sum_min_pq']:.3f} agree1 {s['agree_1_in_a_row']:.3f} "
                    f"agree{config.unroll} {s[last]:.3f}" for n, s in scores.items()))
                torch.save({"head": head.state_dict(), "optimizer": optimizer.state_dict(), "state": state},
                           checkpoint_path)

    card = {"config": asdict(config), "steps": state["step"], "training_minutes": state["seconds"] / 60,
            "answers": len(examples), "answer_positions": positions, "history": state["history"]}
    save_head(head.eval(), output_folder, head_token_ids, card)
    return card
