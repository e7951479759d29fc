"""Distil a small draft model from the bundled target, offline, on a CPU.

The draft is a plain Llama causal LM with the target's width and only a few layers. It reuses the
target's token embeddings (frozen, and tied to its output head), so it need not learn the
vocabulary: only its layers and final norm train. They start as copies of the target's first and
last layers and learn to match the target's next-token distribution on the target's own answers
(forward KL or total variation against the target's top tokens, as in DistillSpec: training/losses.py).
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file
from tqdm import tqdm
from transformers import LlamaForCausalLM

from specdec.config import DraftTrainingConfig
from specdec.errors import SpecDecError
from specdec.models.loading import HEAD_TOKENS_FILE, LoadedModel, cpu_has_native_bf16
from specdec.paths import TRAINING_EVAL_SETS
from specdec.training.campaign import (
    campaign_answers_folder,
    campaign_command,
    campaign_features_folder,
    labelled_campaign_shards,
)
from specdec.training.data import Example, frequent_tokens, make_shards, make_stdlib_shards
from specdec.training.losses import distillation_loss


def build_draft(target: LlamaForCausalLM, layers: int) -> LlamaForCausalLM:
    """A `layers`-deep Llama sharing the target's embeddings; layers start as the target's first/last."""
    config = copy.deepcopy(target.config)
    config.num_hidden_layers = layers
    config.tie_word_embeddings = True
    draft = LlamaForCausalLM(config).float()  # trained in fp32 whatever the target runs in
    draft.model.embed_tokens.weight.data.copy_(target.model.embed_tokens.weight.data)
    draft.model.embed_tokens.weight.requires_grad_(False)  # tied: the head is frozen too
    total = len(target.model.layers)
    sources = [round(i * (total - 1) / max(layers - 1, 1)) for i in range(layers)]  # spread evenly
    for layer, source in zip(draft.model.layers, sources, strict=True):
        layer.load_state_dict(target.model.layers[source].state_dict())
    draft.model.norm.load_state_dict(target.model.norm.state_dict())
    return draft.to(target.device)  # trained where the target runs


def grown(layers: dict[str, torch.Tensor], depth: int) -> tuple[dict[str, torch.Tensor], list[int]]:
    """A trained draft's layers renamed for a `depth`-layer draft: its last layer stays last and the new
    layers go before it -> (the layers, the new layers' indices). Nothing to grow: as they are."""
    trained = 1 + max(int(key.split(".")[2]) for key in layers if key.startswith("model.layers."))
    if trained >= depth:
        return layers, []

    def renamed(key: str) -> str:
        parts = key.split(".")
        if key.startswith("model.layers.") and int(parts[2]) == trained - 1:
            parts[2] = str(depth - 1)
        return ".".join(parts)

    return {renamed(key): value for key, value in layers.items()}, list(range(trained - 1, depth - 1))


def start_as_identity(layer: torch.nn.Module) -> None:
    """Zero what a decoder layer adds to the residual stream (its attention's and MLP's output
    projections), so that it passes its input through unchanged until training moves them."""
    layer.self_attn.o_proj.weight.data.zero_()
    layer.mlp.down_proj.weight.data.zero_()


def trainable_state(draft: LlamaForCausalLM) -> dict[str, torch.Tensor]:
    """What the draft learned: everything but the (shared, frozen) embeddings."""
    return {k: v for k, v in draft.state_dict().items() if "embed_tokens" not in k and "lm_head" not in k}


@dataclass
class EvalSet:
    """The target's greedy answers to held-out prompts, with its distribution p at every position."""

    sequences: list[torch.Tensor]
    answer_starts: list[int]
    target_probs: list[torch.Tensor]  # (answer_length, vocab) per answer, float16


@torch.inference_mode()
def make_eval_set(target: LoadedModel, prompts: list[str], tokens: int, sampled: bool = False) -> EvalSet:
    """`sampled`: along the target's answers sampled at T = 1 (seeded by the prompt's index), the text
    T = 1 drafting meets, not its greedy ones."""
    sequences, starts, probs = [], [], []
    for index, prompt in enumerate(prompts):
        sequence, start = greedy_answer(target, prompt, tokens, seed=index if sampled else None)
        logits = target.model(sequence[None].to(target.device)).logits[0, start - 1 : -1, : target.vocab_size]
        sequences.append(sequence)
        starts.append(start)
        probs.append(torch.softmax(logits.float(), -1).half().cpu())  # stored with the eval set
    return EvalSet(sequences, starts, probs)


@torch.inference_mode()
def greedy_answer(target: LoadedModel, prompt: str, tokens: int, seed: int | None = None
                  ) -> tuple[torch.Tensor, int]:
    """The target's greedy answer to a held-out prompt -> (prompt and answer ids, answer start). With a
    `seed`: its answer sampled at T = 1 from its full distribution instead."""
    prompt_ids = target.chat_ids(prompt)
    ids = torch.tensor([prompt_ids], device=target.device)
    sampling = {"do_sample": False}
    if seed is not None:
        torch.manual_seed(seed)  # transformers samples from the global generator
        sampling = {"do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0}
    output = target.model.generate(ids, attention_mask=torch.ones_like(ids), **sampling,
                                   max_new_tokens=tokens, pad_token_id=target.tokenizer.eos_token_id)
    return output[0].cpu(), len(prompt_ids)


@torch.inference_mode()
def evaluate(
    draft: LlamaForCausalLM, eval_set: EvalSet, vocab_size: int, head_token_ids: list[int] | None = None
) -> dict[str, float]:
    """Mean Σ min(p, q) (the acceptance probability at T=1) and argmax agreement over answer positions.

    With `head_token_ids`, q is what a reduced head gives: zero outside those tokens.
    """
    device = draft.lm_head.weight.device
    outside_head = None
    if head_token_ids is not None:
        outside_head = torch.ones(vocab_size, dtype=torch.bool, device=device)
        outside_head[head_token_ids] = False
    overlap, agree, count = 0.0, 0, 0
    for sequence, start, target_probs in zip(eval_set.sequences, eval_set.answer_starts,
                                             eval_set.target_probs, strict=True):
        logits = draft(sequence[None].to(device)).logits[0, start - 1 : -1, :vocab_size]
        if outside_head is not None:
            logits = logits.masked_fill(outside_head, float("-inf"))
        draft_probs = torch.softmax(logits.float(), -1)
        p = target_probs.to(device).float()
        overlap += torch.minimum(p, draft_probs).sum(-1).sum().item()
        agree += (p.argmax(-1) == draft_probs.argmax(-1)).sum().item()
        count += len(p)
    return {"sum_min_pq": overlap / count, "greedy_agreement": agree / count}


def save_draft(draft: LlamaForCausalLM, folder: Path, card: dict, head_token_ids: list[int] | None) -> None:
    """config.json + the learned weights in bf16 (the embeddings come from the target at load time)."""
    folder.mkdir(parents=True, exist_ok=True)
    if head_token_ids is not None:
        (folder / HEAD_TOKENS_FILE).write_text(json.dumps(head_token_ids) + "\n", encoding="utf-8")
    draft.config.to_json_file(folder / "config.json")
    weights = {k: v.to(torch.bfloat16).contiguous() for k, v in trainable_state(draft).items()}
    save_file(weights, folder / "draft-layers.safetensors")
    (folder / "training.json").write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")


def budget_spent(state: dict, minutes: float, max_steps: int) -> float:
    """How much of a training budget `state` (its "seconds" and "step") has spent: time or steps,
    whichever runs out first. A step budget makes a run the same whatever the machine's load."""
    return max(state["seconds"] / (minutes * 60), state["step"] / max_steps)


def draw_weights(examples: list, code_share: float) -> torch.Tensor | None:
    """Each answer's chance of being drawn (answers with a `kind`), so that code answers make `code_share`
    of the draws and the rest keep their proportions (None for 0: every answer alike). The campaign is a
    third code; a drafter drafts code as well as its data's share of code lets it."""
    if not code_share:
        return None
    is_code = torch.tensor([e.kind == "code" for e in examples])
    if is_code.all() or not is_code.any():
        raise SpecDecError("--code-share needs both code answers and others in the data")
    return torch.where(is_code, code_share / is_code.sum(), (1 - code_share) / (~is_code).sum())


def draw_batch(weights: torch.Tensor | None, count: int, batch_size: int, order: torch.Generator
               ) -> torch.Tensor:
    """Which answers a training step reads: uniform draws (as runs before `weights` existed drew, so
    that they resume alike), or draws by `weights`."""
    if weights is None:
        return torch.randint(count, (batch_size,), generator=order)
    return torch.multinomial(weights, batch_size, replacement=True, generator=order)


def learning_rate_factor(progress: float, decay_fraction: float) -> float:
    """Constant, then a linear fall to 10 % over the last `decay_fraction` of the budget."""
    if decay_fraction <= 0:
        return 1.0
    return 1.0 - 0.9 * min(max((progress - (1 - decay_fraction)) / decay_fraction, 0.0), 1.0)


def warmed_up(step: int, warmup_steps: int) -> float:
    """The share of the peak learning rate at `step` (from 0) of a linear warm-up; 1 without one."""
    return min((step + 1) / warmup_steps, 1.0) if warmup_steps else 1.0


def shard_progress(description: str):
    """A progress bar over data shards, and the callback that moves it: (bar, progress(done, total))."""
    bar = tqdm(desc=description, unit="shard")

    def progress(done: int, total: int) -> None:
        bar.total, bar.n = total, done
        bar.refresh()

    return bar, progress


def _load_examples(paths: list[Path]) -> list[Example]:
    return [e for path in paths for e in torch.load(path, weights_only=False)]


def _campaign_examples(target: LoadedModel, folder: Path, greedy: bool, answers: int, top_k: int
                       ) -> list[Example]:
    """The first `answers` (0: all) of a campaign's answers, labelled from their features into `folder`."""
    bar, progress = shard_progress(f"{'greedy ' * greedy}campaign answers (labels from their features)")
    with bar:
        shards = labelled_campaign_shards(target, campaign_answers_folder(greedy),
                                          campaign_features_folder(greedy), folder, top_k, progress, answers)
    if not shards:
        raise SpecDecError(f"the campaign has no answers yet: run `{campaign_command(greedy)}` first")
    return _load_examples(shards)[: answers or None]


def train_draft(
    target: LoadedModel,
    work_folder: Path,
    output_folder: Path,
    config: DraftTrainingConfig,
    log=print,
    start_layers: dict[str, torch.Tensor] | None = None,
    head_token_ids: list[int] | None = None,
) -> dict:
    """Make data (resumable), train for the time budget (resumable), write the draft + its card.

    `start_layers`: a trained draft's layers to start from instead of the target's first and last;
    `head_token_ids`: the reduced head's tokens, if they are given rather than counted from the data.
    """
    torch.manual_seed(0)
    work_folder.mkdir(parents=True, exist_ok=True)

    if config.campaign:
        examples = _campaign_examples(target, work_folder / "campaign", config.greedy, config.answers,
                                      config.label_top_k)
        if config.greedy_answers:  # sampled answers, and greedy ones beside them
            examples += _campaign_examples(target, work_folder / "campaign-greedy", True,
                                           config.greedy_answers, config.label_top_k)
    else:
        bar, progress = shard_progress("target answers (data)")
        with bar:
            shards = make_shards(target, work_folder / "data", config.samples_per_prompt,
                                 config.generation_batch, config.max_new_tokens, config.label_top_k,
                                 config.max_shards, progress)
        examples = _load_examples(shards)
    bar, progress = shard_progress("standard-library code (data)")
    with bar:
        examples += _load_examples(make_stdlib_shards(
            target, work_folder / "data", config.stdlib_blocks, config.stdlib_batch, config.stdlib_max_tokens,
            config.label_top_k, progress))
    log(f"data: {len(examples)} examples, {sum(len(e.top_ids) for e in examples)} labelled positions")

    eval_path = work_folder / f"eval-{config.eval_tokens}.pt"
    if not eval_path.exists():
        # Along the target's greedy answers (what T = 0 drafting meets) and its answers sampled at T = 1
        # (what T = 1 drafting meets: Σ min(p, q) there is the acceptance rate at T = 1).
        eval_sets = {}
        for name, path in TRAINING_EVAL_SETS.items():
            prompts = json.loads(path.read_text())["prompts"]
            eval_sets[name] = make_eval_set(target, prompts, config.eval_tokens)
            eval_sets[f"{name} sampled"] = make_eval_set(target, prompts, config.eval_tokens, sampled=True)
        torch.save(eval_sets, eval_path)
    eval_sets = torch.load(eval_path, weights_only=False)

    draft = build_draft(target.model, config.layers)
    if start_layers is not None:
        # A deeper draft than the one it starts from: the new layers start as the identity, so training
        # starts from what the trained draft computes.
        start_layers, new_layers = grown(start_layers, config.layers)
        loaded = draft.load_state_dict(start_layers, strict=False)
        shared = {"model.embed_tokens.weight", "lm_head.weight"}  # the target's, not the draft's
        fresh = {key for key in loaded.missing_keys
                 if any(key.startswith(f"model.layers.{i}.") for i in new_layers)}
        if loaded.unexpected_keys or set(loaded.missing_keys) - shared - fresh:
            raise SpecDecError(f"the draft's layers do not fit a {config.layers}-layer draft: "
                               f"{(loaded.unexpected_keys or loaded.missing_keys)[:3]}")
        for i in new_layers:
            start_as_identity(draft.model.layers[i])
    draft.train()
    optimizer = torch.optim.AdamW([p for p in draft.parameters() if p.requires_grad],
                                  lr=config.learning_rate, weight_decay=0.0)
    checkpoint_path = work_folder / "checkpoint.pt"
    state = {"step": 0, "seconds": 0.0, "history": []}
    if checkpoint_path.exists():
        checkpoint = torch.load(checkpoint_path, weights_only=False, map_location=target.device)
        draft.load_state_dict(checkpoint["draft"], strict=False)
        optimizer.load_state_dict(checkpoint["optimizer"])
        state = checkpoint["state"]
        log(f"resumed at step {state['step']} ({state['seconds'] / 60:.1f} min trained)")

    order = torch.Generator().manual_seed(state["step"])
    weights = draw_weights(examples, config.code_share)
    # On CUDA, or a CPU with bf16 math, the draft's forward runs in bf16 (as the head's does): a cheaper
    # step (docs/LOG.md, "Figures that lived in code comments"). Its weights and the optimiser stay fp32.
    bf16 = target.device.type == "cuda" or cpu_has_native_bf16()

    def progress() -> float:
        return budget_spent(state, config.minutes, config.max_steps)

    def read_back(loss: float | None) -> None:
        """Score the draft on the evaluation sets, log it and keep a checkpoint."""
        draft.eval()
        scores = {name: evaluate(draft, s, target.vocab_size) for name, s in eval_sets.items()}
        draft.train()
        state["history"].append({"step": state["step"], "minutes": state["seconds"] / 60,
                                 "learning_rate": optimizer.param_groups[0]["lr"],
                                 "loss": loss, "answers": len(examples), **scores})
        log(f"step {state['step']}: loss {'-' if loss is None else f'{loss:.3f}'} "
            + " ".join(f"{n}: Σmin {s['sum_min_pq']:.3f} agree {s['greedy_agreement']:.3f}"
                       for n, s in scores.items()))
        torch.save({"draft": trainable_state(draft), "optimizer": optimizer.state_dict(),
                    "state": state}, checkpoint_path)

    if not state["history"]:
        read_back(None)  # where training starts: the curve's first point
    with tqdm(total=100, initial=int(100 * progress()), desc="training", unit="%") as bar:
        while progress() < 1:
            start = time.perf_counter()
            batch = [examples[i] for i in draw_batch(weights, len(examples), config.batch_size, order)]
            for group in optimizer.param_groups:
                group["lr"] = config.learning_rate * learning_rate_factor(progress(), config.decay_fraction)
            with torch.autocast(target.device.type, torch.bfloat16, enabled=bf16):
                loss = distillation_loss(draft, batch, argmax_weight=config.argmax_weight, loss=config.loss)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
            optimizer.step()
            state["step"] += 1
            state["seconds"] += time.perf_counter() - start
            bar.update(int(100 * progress()) - bar.n)
            bar.set_postfix(step=state["step"], loss=f"{loss.item():.3f}")
            finished = progress() >= 1
            if state["step"] % config.eval_every == 0 or finished:
                read_back(loss.item())

    card = {"config": asdict(config), "steps": state["step"], "training_minutes": state["seconds"] / 60,
            "answers": len(examples), "labelled_positions": sum(len(e.top_ids) for e in examples),
            "history": state["history"]}
    head = head_token_ids
    if head is None and config.head_tokens:
        head = frequent_tokens(examples, config.head_tokens, target.vocab_size)
    if head is not None:
        card["final_with_reduced_head"] = {
            name: evaluate(draft.eval(), s, target.vocab_size, head) for name, s in eval_sets.items()
        }
    save_draft(draft.eval(), output_folder, card, head)
    return card
