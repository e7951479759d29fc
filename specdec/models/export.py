"""The trained draft outside specdec: a plain transformers folder, and a GGUF file for llama.cpp.

Inside specdec the draft is stored as its two learned layers (the target's embeddings are borrowed)
and drafts over a reduced head of its 8,192 most frequent tokens. An engine knows neither trick, so
the export is the assembled model with its full-vocabulary head (tied to the embeddings, as in the
target): `AutoModelForCausalLM.from_pretrained(folder)` loads it, `generate(assistant_model=...)`
drafts with it, and llama.cpp reads the GGUF as `-md`.

The feature head cannot be exported this way: it reads the target's hidden states, which only an
engine's EAGLE support feeds to a draft (vLLM and SGLang `"method": "eagle"`), each in its own format.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import torch
from transformers import AutoTokenizer, LlamaForCausalLM

from specdec.errors import SpecDecError, first_line
from specdec.models.loading import (
    SHIPPED_DRAFT,
    bundled_draft_folder,
    bundled_gguf,
    cache_root,
    cached_folder,
    shipped_draft_exists,
)

GGUF_NAME = "SmolLM2-135M-Instruct-draft.F32.gguf"
EXPORT_CARD = """# SmolLM2-135M-Instruct-draft

A 2-layer draft model for speculative decoding with SmolLM2-135M-Instruct as the target, distilled
from that target by specdec (`python -m specdec train-draft`); exported by
`python -m specdec export-draft`. It shares the target's tokenizer and embeddings, and its output
head is tied to them (all 49,152 tokens). fp32.

```python
from transformers import AutoModelForCausalLM, AutoTokenizer
target = AutoModelForCausalLM.from_pretrained("<the target>")
draft = AutoModelForCausalLM.from_pretrained("<this folder>")
output = target.generate(input_ids, assistant_model=draft, max_new_tokens=64, do_sample=False)
```
"""


def _permute_for_llama_cpp(weight: torch.Tensor, heads: int) -> torch.Tensor:
    """llama.cpp's converter (convert_hf_to_gguf.py, LlamaModel.permute) interleaves the two rotary
    halves of each head's q and k rows; llama.cpp's rotary embedding expects them that way."""
    return weight.reshape(heads, 2, weight.shape[0] // heads // 2, -1).swapaxes(1, 2).reshape(weight.shape)


def write_gguf(model: LlamaForCausalLM, path: Path) -> None:
    """The model as an F32 GGUF with llama.cpp's tensor names. The tokenizer, chat template and other
    metadata are copied from the bundled target's GGUF (the same tokenizer), with the draft's own
    shape (block count) and name."""
    config = model.config
    target = gguf.GGUFReader(bundled_gguf())
    replaced = {
        gguf.Keys.General.NAME: "SmolLM2-135M-Instruct-draft",
        gguf.Keys.General.FILE_TYPE: int(gguf.LlamaFileType.ALL_F32),
        gguf.Keys.LLM.BLOCK_COUNT.format(arch="llama"): config.num_hidden_layers,
    }
    dropped = {gguf.Keys.General.SIZE_LABEL}
    writer = gguf.GGUFWriter(path, arch="llama")
    for field in target.fields.values():
        name = field.name
        if name == gguf.Keys.General.ARCHITECTURE or name.startswith("GGUF.") or name in dropped:
            continue  # the writer adds the architecture and the file's own header fields
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, replaced.get(name, field.contents()), value_type, sub_type=sub_type)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight":  # tied to the embeddings: llama.cpp reuses token_embd
            continue
        weight = tensor.detach().float()
        if name.endswith("self_attn.q_proj.weight"):
            weight = _permute_for_llama_cpp(weight, config.num_attention_heads)
        elif name.endswith("self_attn.k_proj.weight"):
            weight = _permute_for_llama_cpp(weight, config.num_key_value_heads)
        gguf_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise SpecDecError(f"no llama.cpp tensor name for '{name}'")
        writer.add_tensor(gguf_name, np.ascontiguousarray(weight.numpy()))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def export_draft(out: Path, with_gguf: bool = False) -> list[Path]:
    """Write the shipped draft into `out` as a standard transformers folder (and a GGUF file)."""
    if not shipped_draft_exists():
        raise SpecDecError(f"no trained draft is shipped at {SHIPPED_DRAFT}: nothing to export")
    if out.exists() and not out.is_dir():
        raise SpecDecError(f"'{out}' is a file: name a folder to export into")
    if out.is_dir() and any(out.iterdir()):
        raise SpecDecError(f"'{out}' is not empty: name a new or empty folder")
    assembled = bundled_draft_folder()
    try:
        out.mkdir(parents=True, exist_ok=True)
        model = LlamaForCausalLM.from_pretrained(assembled, dtype=torch.float32)
        model.save_pretrained(out)
        AutoTokenizer.from_pretrained(assembled).save_pretrained(out)
        (out / "README.md").write_text(EXPORT_CARD)
        if with_gguf:
            write_gguf(model, out / GGUF_NAME)
    except SpecDecError:
        raise
    except OSError as error:
        raise SpecDecError(f"could not write the export into '{out}': {first_line(error)}") from error
    return sorted(out.iterdir())


def exported_draft_folder() -> Path:
    """The shipped draft exported once into the cache (for the app's live transformers run)."""
    name = f"{bundled_draft_folder().name}-exported"  # the assembled draft's name carries its version
    return cached_folder(cache_root() / name, export_draft)
