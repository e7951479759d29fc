"""Loading and saving an early exit (core.early_exit): the target's first L layers, maybe an adapter.

`early:L` loads no weights: it is the target's first L layers and its own norm and head. A trained exit's
folder holds `config.json` (the adapter's Llama layer shape and `exit_layer`), `exit-adapter.safetensors`
(its projection, decoder layers and norm, bf16), `head_tokens.json` (the tokens the reduced head scores)
and a model card. The layers it exits from, the embeddings and the output head are the target's, so an
exit only loads next to its target.

On a CPU with an fp32 target, an exit drafts as the int8 drafts do: the adapter, the head's rows and a
copy of the target's first L layers rounded to int8 (`drafting_layers`), each keeping its int8 rows only
(kernels.matmul.keep_int8_only). A drafted token then reads a quarter of those layers' fp32 bytes; the
verified tokens' keys and values in the one cache are still the target's own. What it adds to the
server's memory is those int8 rows: some 26 MB for the bundled exit, 19 MB for `early:4`.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import LlamaConfig

from specdec.core.cached_model import ReducedHead
from specdec.core.early_exit import ExitAdapter
from specdec.errors import SpecDecError, first_line
from specdec.kernels.decoder_step import STEPPED_MODEL_TYPES
from specdec.kernels.matmul import describe_layout, int8_available, keep_int8_only, layout_of, set_layout
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
    drafting_layers: nn.ModuleList | None = None  # layers 1..L rounded to int8; None: the target's own

    @property
    def num_parameters(self) -> int:
        """What it adds to the target: the adapter's weights (not its unused token table)."""
        if self.adapter is None:
            return 0
        return sum(p.numel() for key, p in self.adapter.named_parameters() if not _not_its_own(key))

    @property
    def own_bytes(self) -> int:
        """The bytes of its own tensors beside the target's: adapter, head rows, rounded layers."""
        head = self.reduced.layer if self.reduced is not None else None
        modules = [m for m in (self.adapter, head, self.drafting_layers) if m is not None]
        return sum(t.untyped_storage().nbytes() for m in modules for key, t in m.state_dict().items()
                   if not _not_its_own(key) and t.stride() != (0, 0))

    def describe(self) -> str:
        tokens = f"{len(self.reduced.token_ids)} tokens" if self.reduced is not None else "the full head"
        layers = f"the target's first {self.layers} layers"
        if self.drafting_layers is not None:
            layers += " (drafting through an int8 copy)"
        added = f"{self.own_bytes / 2**20:.1f} MiB of its own"
        if self.adapter is None:
            return f"{self.name} ({layers}, untrained exit, {tokens}, {added})"
        weights = self.adapter.decoder.layers[0].self_attn.q_proj.weight
        return (f"{self.name} ({layers} and an exit adapter, {self.num_parameters / 1e6:.1f} M parameters, "
                f"{tokens}, {weights.device.type}, {describe_layout(layout_of(self.adapter))}, {added})")


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
        return _rounded(LoadedExit(name, layers, None, reduced_for(target, tokens)), target)
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
    token_ids = json.loads((folder / EXIT_TOKENS).read_text())
    return _rounded(LoadedExit(name, config.exit_layer, adapter, reduced_for(target, token_ids)), target)


def _rounded(loaded: LoadedExit, target: LoadedModel) -> LoadedExit:
    """On a CPU with an fp32 target: the adapter, head rows and a copy of layers 1..L in int8 rows only,
    as the int8 drafts are (a quarter of fp32's bytes to read a drafted token; it changes q, nothing
    else). Elsewhere the exit drafts through the target's own layers at the target's precision."""
    if not (target.device.type == "cpu" and target.model.dtype == torch.float32 and int8_available()
            and "SPECDEC_DTYPE" not in os.environ
            and target.model.config.model_type in STEPPED_MODEL_TYPES):  # the copy drafts by hand
        return loaded
    drafting = nn.ModuleList()
    for layer in target.model.get_decoder().layers[: loaded.layers]:
        drafting.append(copy.deepcopy(layer))  # one layer at a time: a layer's fp32 copy at most at once
        keep_int8_only(drafting[-1])
    for module in (loaded.adapter, loaded.reduced.layer if loaded.reduced is not None else None):
        if module is not None:
            keep_int8_only(module)
    return replace(loaded, drafting_layers=drafting)

