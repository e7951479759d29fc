"""Loading and saving a feature head (core.feature_head): a few MB of layers that read the target.

A head folder holds `config.json` (the head's Llama layer shape), `feature-head.safetensors` (its
layers, bf16), `head_tokens.json` (the tokens its output head scores) and a model card. The
embeddings and the output head are the target's own, so a head only loads next to its target.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import DynamicCache, LlamaConfig

from specdec.clock import now
from specdec.core.cached_model import ReducedHead, linear_kind
from specdec.core.feature_head import FeatureHead
from specdec.errors import SpecDecError, first_line
from specdec.kernels.choice import cache_sweeper, once
from specdec.kernels.decoder_step import embedded_step
from specdec.kernels.matmul import INT8, describe_layout, int8_available, layout_of, set_layout
from specdec.models.loading import LoadedModel
from specdec.paths import ASSETS, BUNDLED_HEAD, BUNDLED_TARGET

SHIPPED_HEAD = ASSETS / "feature_head"
HEAD_WEIGHTS = "feature-head.safetensors"
HEAD_TOKENS = "head_tokens.json"


@dataclass(frozen=True)
class LoadedHead:
    """A feature head on its target's device, with the target's output rows for its tokens."""

    name: str
    head: FeatureHead
    reduced: ReducedHead

    @property
    def num_parameters(self) -> int:
        return sum(p.numel() for key, p in self.head.named_parameters() if not _unused(key))

    def describe(self) -> str:
        weights = next(self.head.parameters())
        return (f"{self.name} (feature head, {self.num_parameters / 1e6:.1f} M parameters, "
                f"{len(self.reduced.token_ids)} tokens, {weights.device.type}, {weights.dtype}, "
                f"{describe_layout(layout_of(self.head))})")


def _unused(key: str) -> bool:
    return key.startswith("decoder.embed_tokens")  # the decoder's token table: the head reads embeddings


def is_head(name: str) -> bool:
    """Whether a drafter name means a feature head: the bundled one, or a folder holding one."""
    return name == BUNDLED_HEAD or (Path(name) / HEAD_WEIGHTS).is_file()


def shipped_head_exists() -> bool:
    return (SHIPPED_HEAD / HEAD_WEIGHTS).is_file()


def save_head(head: FeatureHead, folder: Path, token_ids: list[int], card: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    head.config.to_json_file(folder / "config.json")
    state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in head.state_dict().items()
             if not _unused(k)}
    save_file(state, folder / HEAD_WEIGHTS)
    (folder / HEAD_TOKENS).write_text(json.dumps(token_ids))
    (folder / "training.json").write_text(json.dumps(card, indent=1))


def load_head(name: str, target: LoadedModel) -> LoadedHead:
    """The bundled head (for the bundled target only) or a head folder; fp32 on a CPU, in the target's
    matrix layout (the head's layers have the target's widths) or with int8 weights where those draft
    faster (`_faster_layout`; SPECDEC_DTYPE keeps it off int8), else the target's dtype."""
    if name == BUNDLED_HEAD:
        if target.name != BUNDLED_TARGET:
            raise SpecDecError(f"the bundled feature head reads {BUNDLED_TARGET}'s features, not "
                               f"'{target.name}''s: choose another drafter")
        if not shipped_head_exists():
            raise SpecDecError(f"no feature head is shipped at {SHIPPED_HEAD}: use --drafter ngram")
        folder = SHIPPED_HEAD
    else:
        folder = Path(name)
    try:
        return _read_head(name, folder, target)
    except SpecDecError:
        raise
    except Exception as error:  # noqa: BLE001 - missing or damaged files: one line, not a traceback
        raise SpecDecError(f"could not load feature head '{name}': {first_line(error)}") from error


def _read_head(name: str, folder: Path, target: LoadedModel) -> LoadedHead:
    config = LlamaConfig.from_json_file(folder / "config.json")
    if config.hidden_size != target.model.config.hidden_size:
        raise SpecDecError(f"feature head '{name}' reads features of width {config.hidden_size}, but "
                           f"target '{target.name}' has {target.model.config.hidden_size}")
    if getattr(config, "feature_layers", None):  # experiments/head_layers.py tried it: not in the engine
        raise SpecDecError(f"feature head '{name}' reads the target's layers {config.feature_layers} besides "
                           "its last, which the engine does not pass to a head: choose another drafter")
    head = FeatureHead(config)
    result = head.load_state_dict({k: v.float() for k, v in load_file(folder / HEAD_WEIGHTS).items()},
                                  strict=False)
    if missing := [k for k in result.missing_keys if not _unused(k)]:
        raise SpecDecError(f"feature head '{name}' lacks weights: {', '.join(missing[:3])}")
    head = head.to(target.device, target.model.dtype).eval()
    set_layout(head, layout_of(target.model))
    token_ids = json.loads((folder / HEAD_TOKENS).read_text())
    reduced = ReducedHead.of(target.model, token_ids)
    if (target.device.type == "cpu" and target.model.dtype == torch.float32 and int8_available()
            and "SPECDEC_DTYPE" not in os.environ):
        set_layout(head, _faster_layout(head, reduced, target.model.get_output_embeddings().weight.shape[0]))
    return LoadedHead(name, head, reduced)


def _faster_layout(head: FeatureHead, reduced: ReducedHead, vocab_size: int) -> str:
    """The target's layout or int8 weights (kernels.matmul.Int8Linear), whichever drafts a token faster
    here: drafting steps in turns, each after a sweep of the CPU's caches (`_drafting_step_seconds`),
    as kernels.choice.faster_precision times a draft; timed once per machine and head. Like a
    draft's, a head's numbers change q and nothing else."""

    def decide() -> str:
        # Each layout on a copy of its own (switching one module back and forth would reorder its
        # weights at every turn), the reduced head too (it follows the head's layout).
        candidates = {layout_of(head): (head, reduced),
                      INT8: (copy.deepcopy(head), ReducedHead(reduced.token_ids, reduced.weight))}
        set_layout(candidates[INT8][0], INT8)
        context = torch.randn(1, 64, head.config.hidden_size, generator=torch.Generator().manual_seed(0))
        cache = DynamicCache(config=head.config)
        with torch.inference_mode():
            head(context, context, cache)  # a context to step after; any numbers will do
        vector, sweeper = context[0, :1], cache_sweeper()
        fastest = dict.fromkeys(candidates, float("inf"))
        for _ in range(9):
            for layout, (stepping, scoring) in candidates.items():
                seconds = _drafting_step_seconds(stepping, scoring, vocab_size, cache, vector, sweeper)
                fastest[layout] = min(fastest[layout], seconds)
        return min(fastest, key=fastest.get)

    return once("head precision", head, decide)


@torch.inference_mode()
def _drafting_step_seconds(head: FeatureHead, reduced: ReducedHead, vocab_size: int, cache: DynamicCache,
                           vector: torch.Tensor, sweeper: torch.Tensor) -> float:
    """A drafting step in the head's layout, after touching `sweeper` (kernels.choice.cache_sweeper): one
    position through the head (left out of `cache` again), then its logits over the reduced head."""
    sweeper.add_(1.0)
    start = now()
    reduced.logits(embedded_step(head.decoder, cache, head.fuse(vector, vector)[None]), vocab_size,
                   linear_kind(head))
    seconds = now() - start
    cache.crop(-1)
    return seconds
