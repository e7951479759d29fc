"""Loading and saving an early exit (core.early_exit): the target's first L layers, maybe an adapter.

`early:L` loads nothing: it is the target's first L layers and its own norm and head. A trained exit's
folder holds `config.json` (the adapter's Llama layer shape and `exit_layer`), `exit-adapter.safetensors`
(its projection, decoder layers and norm, bf16), `head_tokens.json` (the tokens the reduced head scores)
and a model card. The layers it exits from, the embeddings and the output head are the target's, so an
exit only loads next to its target.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import LlamaConfig

from specdec.core.cached_model import ReducedHead
from specdec.core.early_exit import ExitAdapter
from specdec.errors import SpecDecError, first_line
from specdec.kernels.matmul import INT8, describe_layout, int8_available, layout_of, set_layout
from specdec.model_names import early_exit_layers
from specdec.models.loading import SHIPPED_DRAFT, LoadedModel
from specdec.paths import ASSETS, BUNDLED_EXIT, BUNDLED_TARGET

SHIPPED_EXIT = ASSETS / "exit_adapter"
EXIT_WEIGHTS = "exit-adapter.safetensors"
EXIT_TOKENS = "head_tokens.json"
DRAFT_HEAD_TOKENS = SHIPPED_DRAFT / "draft_head_tokens.json"  # the draft's frequent tokens (FR-Spec)


@dataclass(frozen=True)
class LoadedExit:
    """An early exit after the target's layer `layers`: an adapter or none, and the reduced head."""

    name: str
    layers: int
    adapter: ExitAdapter | None
    reduced: ReducedHead | None  # None: the target's full output head

    @property
    def num_parameters(self) -> int:
        """What it adds to the target: the adapter's weights (not its unused token table)."""
        if self.adapter is None:
            return 0
        return sum(p.numel() for key, p in self.adapter.named_parameters() if not _not_its_own(key))

    def describe(self) -> str:
        tokens = f"{len(self.reduced.token_ids)} tokens" if self.reduced is not None else "the full head"
        if self.adapter is None:
            return f"{self.name} (the target's first {self.layers} layers, untrained exit, {tokens})"
        weights = self.adapter.decoder.layers[0].self_attn.q_proj.weight
        return (f"{self.name} (the target's first {self.layers} layers and an exit adapter, "
                f"{self.num_parameters / 1e6:.1f} M parameters, {tokens}, {weights.device.type}, "
                f"{describe_layout(layout_of(self.adapter))})")


def _not_its_own(key: str) -> bool:
    """The decoder's token table: unused, it reads the target's embeddings and states."""
    return key.startswith("decoder.embed_tokens")


def is_exit(name: str) -> bool:
    """Whether a drafter name means an early exit: `early:L`, the bundled exit, or a folder holding one."""
    return (early_exit_layers(name) is not None or name == BUNDLED_EXIT
            or (Path(name) / EXIT_WEIGHTS).is_file())


def shipped_exit_exists() -> bool:
    return (SHIPPED_EXIT / EXIT_WEIGHTS).is_file()


def save_exit(adapter: ExitAdapter, folder: Path, token_ids: list[int], card: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    adapter.config.to_json_file(folder / "config.json")
    state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in adapter.state_dict().items()
             if not _not_its_own(k)}
    save_file(state, folder / EXIT_WEIGHTS)
    (folder / EXIT_TOKENS).write_text(json.dumps(token_ids))
    (folder / "training.json").write_text(json.dumps(card, indent=1))


def reduced_for(target: LoadedModel, token_ids: list[int] | None) -> ReducedHead | None:
    return None if token_ids is None else ReducedHead.of(target.model, token_ids)


def load_exit(name: str, target: LoadedModel) -> LoadedExit:
    """`early:L` (with the draft's reduced head for the bundled target, else the full head), the bundled
    exit (for the bundled target only) or an exit folder."""
    depth = target.model.config.num_hidden_layers
    layers = early_exit_layers(name)
    if layers is not None:
        if layers >= depth:
            raise SpecDecError(f"'{name}': target '{target.name}' has {depth} layers; an early exit uses "
                               f"fewer (1 to {depth - 1})")
        bundled = target.name == BUNDLED_TARGET and DRAFT_HEAD_TOKENS.is_file()
        tokens = json.loads(DRAFT_HEAD_TOKENS.read_text()) if bundled else None
        return LoadedExit(name, layers, None, reduced_for(target, tokens))
    if name == BUNDLED_EXIT:
        if target.name != BUNDLED_TARGET:
            raise SpecDecError(f"the bundled exit adapter reads {BUNDLED_TARGET}'s layers, not "
                               f"'{target.name}''s: choose another drafter")
        if not shipped_exit_exists():
            raise SpecDecError(f"no exit adapter is shipped at {SHIPPED_EXIT}: use --drafter early:4")
        folder = SHIPPED_EXIT
    else:
        folder = Path(name)
    try:
        return _read_exit(name, folder, target)
    except SpecDecError:
        raise
    except Exception as error:  # noqa: BLE001 - missing or damaged files: one line, not a traceback
        raise SpecDecError(f"could not load exit adapter '{name}': {first_line(error)}") from error


def _read_exit(name: str, folder: Path, target: LoadedModel) -> LoadedExit:
    config = LlamaConfig.from_json_file(folder / "config.json")
    if config.hidden_size != target.model.config.hidden_size:
        raise SpecDecError(f"exit adapter '{name}' reads states of width {config.hidden_size}, but target "
                           f"'{target.name}' has {target.model.config.hidden_size}")
    if not 1 <= getattr(config, "exit_layer", 0) < target.model.config.num_hidden_layers:
        raise SpecDecError(f"exit adapter '{name}' reads a layer target '{target.name}' does not have")
    adapter = ExitAdapter(config)
    result = adapter.load_state_dict({k: v.float() for k, v in load_file(folder / EXIT_WEIGHTS).items()},
                                     strict=False)
    if missing := [k for k in result.missing_keys if not _not_its_own(k)]:
        raise SpecDecError(f"exit adapter '{name}' lacks weights: {', '.join(missing[:3])}")
    adapter = adapter.to(target.device, target.model.dtype).eval()
    set_layout(adapter, layout_of(target.model))
    if (target.device.type == "cpu" and target.model.dtype == torch.float32 and int8_available()
            and "SPECDEC_DTYPE" not in os.environ):
        # A quarter of fp32's bytes, as a draft's or a head's int8 weights: it changes q, nothing else.
        set_layout(adapter, INT8)
    token_ids = json.loads((folder / EXIT_TOKENS).read_text())
    return LoadedExit(name, config.exit_layer, adapter, reduced_for(target, token_ids))

