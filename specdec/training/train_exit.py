"""Train an exit adapter (core.early_exit) for the bundled target, offline, on a CPU.

Data: the greedy campaign's answers (assets/campaign-greedy), the shards the fp32 target wrote, whose
every answer token is the fp32 target's argmax after the text before it: the token a T = 0 draft must
guess. The target's first L layers read each batch whole (teacher forcing, as the feature head's
features are made; no gradient), and the adapter learns from their output at layer L.

Loss at every answer position: cross-entropy between the adapter's q, through the reduced output head
(the target's rows for the draft's frequent tokens), and the target's next token. A target token the
reduced head cannot score is left out of the loss (q is 0 there, whatever is learned).

The drafts' own positions need no unrolled training (as a feature head's do): layers 1..L over a
drafted token are the target's own layers over the same text, so what the adapter reads while drafting
is exactly what it read in training.

The adapter starts as the trained draft (its layers and norm; the projection of layer L's state at
zero), so it drafts as the draft does until training teaches it to read the target's shallow layers.
Evaluation: the share of answer positions where the adapter's argmax is the target's token, on answers
no step trains on, beside the untrained exit's (`early:L`) and the starting point's on the same positions.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from tqdm import tqdm
from transformers import LlamaModel

from specdec.config import ExitTrainingConfig
from specdec.core.early_exit import ExitAdapter, adapter_config
from specdec.errors import SpecDecError
from specdec.models.exit_files import save_exit
from specdec.models.loading import LoadedModel
from specdec.paths import GREEDY_CAMPAIGN_ANSWERS
from specdec.training.campaign import ANSWERS_PATTERN, load_answers
from specdec.training.data import right_padded
from specdec.training.train_draft import budget_spent, draw_batch, learning_rate_factor, warmed_up

# The greedy campaign's shards written by the fp32 target (its card: shards 0-117); later ones were
# written in bf16, whose argmax parts from the fp32 target's now and then.
FP32_SHARDS = 118


@dataclass
class ExitExample:
    token_ids: torch.Tensor  # (length,) prompt and answer
    answer_start: int
    kind: str


def campaign_examples(shards: range) -> list[ExitExample]:
    """The greedy campaign's answers in `shards` (token ids only: no features needed)."""
    examples = []
    for index in shards:
        path = GREEDY_CAMPAIGN_ANSWERS / ANSWERS_PATTERN.format(index)
        if not path.exists():
            raise SpecDecError(f"{path} is missing: the greedy campaign's answers ship in assets/")
        examples += [ExitExample(a.token_ids, a.answer_start, a.kind) for a in load_answers(path)]
    return examples


def shallow_decoder(target: LoadedModel, layers: int) -> LlamaModel:
    """A copy of the target's embeddings and first `layers` layers, to read training batches whole."""
    config = copy.deepcopy(target.model.config)
    config.num_hidden_layers = layers
    decoder = LlamaModel(config)
    own = target.model.get_decoder().state_dict()
    decoder.load_state_dict({k: v for k, v in own.items() if not k.startswith("layers.")
                             or int(k.split(".")[1]) < layers})
    return decoder.to(target.device, torch.float32).eval().requires_grad_(False)


def build_adapter(target: LoadedModel, layers: int, draft_layers: dict[str, torch.Tensor], depth: int
                  ) -> ExitAdapter:
    """The draft's `depth` layers and norm, reading embedding + fc(norm(state after layer `layers`)), with
    fc at zero and the norm at the embeddings' scale (fixed): it starts as the draft."""
    adapter = ExitAdapter(adapter_config(target.model.config, layers, depth)).float()
    state = {k.removeprefix("model."): v.float() for k, v in draft_layers.items()
             if k.startswith(("model.layers.", "model.norm."))}  # not its token table or output head
    loaded = adapter.decoder.load_state_dict(state, strict=False)
    if loaded.unexpected_keys or set(loaded.missing_keys) != {"embed_tokens.weight"}:
        raise SpecDecError(f"the draft's layers do not fit a {depth}-layer adapter: "
                           f"{(loaded.unexpected_keys or loaded.missing_keys)[:3]}")
    with torch.no_grad():
        embeddings = target.model.get_input_embeddings().weight
        adapter.feature_norm.weight.fill_(embeddings.float().pow(2).mean(-1).sqrt().mean().item())
        adapter.fc.weight.zero_()
        adapter.fc.bias.zero_()
    adapter.feature_norm.requires_grad_(False)
    adapter.decoder.embed_tokens.requires_grad_(False)  # unused: it reads the target's embeddings
    return adapter.to(target.device)


@dataclass
class Batch:
    embeddings: torch.Tensor  # (B, W, hidden): the target's embeddings of the tokens
    shallow: torch.Tensor  # (B, W, hidden): the target's state after layer L
    attention_mask: torch.Tensor  # (B, W)
    labels: torch.Tensor  # (B, W): the reduced head's column of the next token, or -100 (not counted)


def make_batch(examples: list[ExitExample], shallow: LlamaModel, columns: torch.Tensor) -> Batch:
    """Position i is counted if token i + 1 is an answer token the reduced head scores."""
    ids, mask = right_padded([e.token_ids for e in examples])
    device = shallow.embed_tokens.weight.device
    labels = torch.full(ids.shape, -100, dtype=torch.long)
    for row, e in enumerate(examples):
        span = slice(max(e.answer_start - 1, 0), len(e.token_ids) - 1)
        labels[row, span] = columns[e.token_ids[span.start + 1 : span.stop + 1]]
    with torch.no_grad():
        output = shallow(input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=True)
    # hidden_states[0]: the embeddings; [-1]: layer L's output, before any norm
    return Batch(output.hidden_states[0], output.hidden_states[-1], mask.to(device), labels.to(device))


def adapter_logits(adapter: ExitAdapter | None, batch: Batch, rows: torch.Tensor,
                   norm: torch.nn.Module) -> torch.Tensor:
    """(B, W, head tokens): the adapter's scores (None: the untrained exit's, norm then head)."""
    if adapter is None:
        return norm(batch.shallow) @ rows.T
    return adapter(batch.embeddings, batch.shallow, attention_mask=batch.attention_mask) @ rows.T


@torch.no_grad()
def evaluate(adapter: ExitAdapter | None, batches: list[tuple[str, Batch]], rows: torch.Tensor,
             norm: torch.nn.Module) -> dict[str, float]:
    """Per kind and overall: the share of answer positions whose argmax is the target's token (a token
    the reduced head cannot score counts as missed)."""
    hits: dict[str, list[float]] = {}
    for kind, batch in batches:
        counted = batch.labels != -100
        agree = (adapter_logits(adapter, batch, rows, norm).argmax(-1) == batch.labels)[counted]
        hits.setdefault(kind, []).extend(agree.float().tolist())
    scores = {kind: sum(h) / len(h) for kind, h in sorted(hits.items())}
    every = [x for h in hits.values() for x in h]
    return {"all": sum(every) / len(every), **scores}


def eval_batches(examples: list[ExitExample], shallow: LlamaModel, columns: torch.Tensor
                 ) -> list[tuple[str, Batch]]:
    """Every evaluation answer read once by the target's first layers, whole: one batch each. A token
    the head cannot score keeps its label here (as column -1), so that it counts as missed."""
    return [(e.kind, make_batch([e], shallow, columns.clamp(min=-1))) for e in examples]


def train_exit(target: LoadedModel, head_token_ids: list[int], draft_layers: dict[str, torch.Tensor],
               draft_depth: int, work_folder, output_folder, config: ExitTrainingConfig, log=print) -> dict:
    """Train for the time budget (resumable from work_folder/checkpoint.pt), write the adapter."""
    layers, depth = config.exit_layer, target.model.config.num_hidden_layers
    if not 1 <= layers < depth:
        raise SpecDecError(f"--exit-layer must be 1 to {depth - 1}: the target has {depth} layers")
    torch.manual_seed(0)
    work_folder.mkdir(parents=True, exist_ok=True)
    vocab = target.model.get_output_embeddings().weight.shape[0]
    # Each vocabulary id's column in the reduced head: -100 (left out of the loss) for ids it lacks.
    columns = torch.full((vocab,), -100, dtype=torch.long)
    columns[torch.tensor(head_token_ids)] = torch.arange(len(head_token_ids))
    rows = target.model.get_output_embeddings().weight.detach()[head_token_ids].float()

    eval_count = config.eval_shards
    examples = campaign_examples(range(FP32_SHARDS - eval_count))
    held = campaign_examples(range(FP32_SHARDS - eval_count, FP32_SHARDS))[: config.eval_answers]
    positions = sum(len(e.token_ids) - e.answer_start for e in examples)
    log(f"data: {len(examples)} answers, {positions} answer positions; evaluation: {len(held)} answers")

    shallow = shallow_decoder(target, layers)
    adapter = build_adapter(target, layers, draft_layers, draft_depth)
    norm = target.model.get_decoder().norm  # the untrained exit's: the target's own final norm
    held_batches = eval_batches(held, shallow, columns)
    untrained = evaluate(None, held_batches, rows, norm)
    start = evaluate(adapter.eval(), held_batches, rows, norm)
    for what, scores in ((f"untrained exit after layer {layers}", untrained), ("the adapter at its start "
                                                                              "(the draft)", start)):
        log(f"{what}: argmax agrees " + " ".join(f"{k} {v:.3f}" for k, v in scores.items()))

    adapter.train()
    if not config.train_layers:  # the draft's layers and norm stay as they are: only fc learns
        adapter.decoder.requires_grad_(False)
    trained = [p for p in adapter.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=config.learning_rate, weight_decay=0.0)
    checkpoint_path = work_folder / f"checkpoint-layer-{layers}.pt"
    state = {"step": 0, "seconds": 0.0, "history": []}
    if checkpoint_path.exists():
        checkpoint = torch.load(checkpoint_path, weights_only=False, map_location=target.device)
        adapter.load_state_dict(checkpoint["adapter"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        state = checkpoint["state"]
        log(f"resumed at step {state['step']} ({state['seconds'] / 60:.1f} min trained)")
    order = torch.Generator().manual_seed(state["step"])

    def progress() -> float:
        return budget_spent(state, config.minutes, config.max_steps)

    with tqdm(total=100, initial=int(100 * progress()), desc=f"training (exit after layer {layers})",
              unit="%") as bar:
        while progress() < 1:
            start = time.perf_counter()
            picked = draw_batch(None, len(examples), config.batch_size, order)
            batch = make_batch([examples[i] for i in picked], shallow, columns)
            rate = config.learning_rate * warmed_up(state["step"], config.warmup_steps) * \
                learning_rate_factor(progress(), 0.3)
            for group in optimizer.param_groups:
                group["lr"] = rate
            logits = adapter_logits(adapter, batch, rows, norm)
            loss = F.cross_entropy(logits.flatten(0, 1), batch.labels.flatten(), ignore_index=-100)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trained, 1.0)
            optimizer.step()
            state["step"] += 1
            state["seconds"] += time.perf_counter() - start
            bar.update(int(100 * progress()) - bar.n)
            bar.set_postfix(step=state["step"], loss=f"{loss.item():.3f}")
            if state["step"] % config.eval_every == 0 or progress() >= 1:
                adapter.eval()
                scores = evaluate(adapter, held_batches, rows, norm)
                adapter.train()
                state["history"].append({"step": state["step"], "minutes": state["seconds"] / 60,
                                         "learning_rate": rate, "loss": loss.item(), "agree": scores})
                log(f"step {state['step']}: loss {loss.item():.3f} argmax agrees " +
                    " ".join(f"{k} {v:.3f}" for k, v in scores.items()))
                torch.save({"adapter": adapter.state_dict(), "optimizer": optimizer.state_dict(),
                            "state": state}, checkpoint_path)

    card = {"config": asdict(config), "steps": state["step"], "training_minutes": state["seconds"] / 60,
            "answers": len(examples), "answer_positions": positions, "untrained_agree": untrained,
            "start_agree": start,
            "history": state["history"]}
    save_exit(adapter.eval(), output_folder, head_token_ids, card)
    return card
