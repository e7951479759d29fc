"""Loading any pair from folders, and refusing pairs that do not share a tokenizer."""

import os

import pytest
import torch

from specdec.config import SamplingConfig, Settings
from specdec.core.cached_model import CachedModel
from specdec.errors import SpecDecError
from specdec.kernels import choice, matmul
from specdec.models import loading as models
from specdec.models.pair import NGRAM, ModelPair
from specdec.models.runs import generate


def test_local_pair_loads_and_generates(tiny_pair_dirs):
    pair = ModelPair.load(tiny_pair_dirs["target"], tiny_pair_dirs["draft"])
    assert pair.drafter_name == tiny_pair_dirs["draft"]
    ids = pair.encode_prompt("def add(a, b):", chat=False, max_new_tokens=10)
    result = generate(pair, ids, Settings(gamma=3, max_new_tokens=10))
    assert len(result.token_ids) == 10 and result.rounds


@pytest.mark.slow  # about a second on a 2-core machine: the whole suite runs it
def test_padded_draft_pairs_with_the_target(tiny_pair_dirs):
    """Same vocabulary, wider embedding matrix (as within real families): allowed."""
    pair = ModelPair.load(tiny_pair_dirs["target"], tiny_pair_dirs["padded_draft"])
    assert pair.draft.model.get_output_embeddings().weight.shape[0] == 320
    ids = pair.encode_prompt("for i in", chat=False)
    result = generate(pair, ids, Settings(gamma=2, sampling=SamplingConfig(0), max_new_tokens=6))
    assert len(result.token_ids) == 6 and max(result.token_ids) < 300


def test_mismatched_tokenizers_are_refused_with_a_message(tiny_pair_dirs):
    with pytest.raises(SpecDecError, match="tokenizers differ"):
        ModelPair.load(tiny_pair_dirs["target"], tiny_pair_dirs["other_tokenizer"])


def test_unknown_model_is_refused_with_a_message(tmp_path):
    with pytest.raises(SpecDecError, match="could not load model"):
        ModelPair.load(str(tmp_path / "no-such-model"), NGRAM)


@pytest.mark.parametrize("prompt", ["", "   \n"])
def test_empty_prompt_is_refused(tiny_pair_dirs, prompt):
    pair = ModelPair.load(tiny_pair_dirs["target"], NGRAM)
    with pytest.raises(SpecDecError, match="empty"):
        pair.encode_prompt(prompt, chat=False)


def test_prompt_longer_than_the_context_is_refused(tiny_pair_dirs):
    pair = ModelPair.load(tiny_pair_dirs["target"], NGRAM)  # context: 256 positions
    with pytest.raises(SpecDecError, match="exceeds the target's context of 256"):
        pair.encode_prompt("the quick brown fox " * 100, chat=False)
    with pytest.raises(SpecDecError, match="exceeds"):
        pair.encode_prompt("the quick brown fox " * 10, chat=False, max_new_tokens=250)


def test_chat_without_a_template_is_refused(tiny_pair_dirs):
    pair = ModelPair.load(tiny_pair_dirs["target"], NGRAM)
    with pytest.raises(SpecDecError, match="no chat template"):
        pair.encode_prompt("hi", chat=True)


def test_bad_gamma_is_refused():
    with pytest.raises(SpecDecError, match="gamma"):
        Settings(gamma=0)


def test_draft_folder_with_head_tokens_gets_a_reduced_head(tiny_pair_dirs, tmp_path):
    import json
    import shutil

    folder = tmp_path / "draft-with-head"
    shutil.copytree(tiny_pair_dirs["draft"], folder)
    (folder / "draft_head_tokens.json").write_text(json.dumps(list(range(0, 300, 2))))
    pair = ModelPair.load(tiny_pair_dirs["target"], str(folder))
    drafter = pair.new_drafter()
    assert drafter.cached.head.token_ids.tolist() == list(range(0, 300, 2))
    assert pair.draft.reduced_head is pair.draft.reduced_head  # sliced once, shared by runs
    ids = pair.encode_prompt("def add(a, b):", chat=False)
    result = generate(pair, ids, Settings(gamma=3, max_new_tokens=8))
    assert len(result.token_ids) == 8
    drafted = [t for r in result.rounds for t in r.drafted_tokens]
    assert all(t % 2 == 0 for t in drafted)  # the draft can only propose tokens its head scores


def test_cpu_target_is_fp32_and_draft_bf16_only_where_the_cpu_has_bf16_math(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("a CPU's rules (a CUDA machine's: test_dtype_rules_on_a_gpu)")
    cpu = torch.device("cpu")
    monkeypatch.delenv("SPECDEC_DTYPE", raising=False)
    monkeypatch.setattr(models, "cpu_has_native_bf16", lambda: True)
    assert models.pick_device() == (cpu, torch.float32)  # a target: exact greedy agreement
    assert models.pick_device(fast=True) == (cpu, torch.bfloat16)
    monkeypatch.setattr(models, "cpu_has_native_bf16", lambda: False)
    assert models.pick_device(fast=True) == (cpu, torch.float32)  # emulated bf16 would be slower
    monkeypatch.setenv("SPECDEC_DTYPE", "bfloat16")  # the override wins both ways
    assert models.pick_device() == (cpu, torch.bfloat16)
    monkeypatch.setenv("SPECDEC_DTYPE", "float32")
    monkeypatch.setattr(models, "cpu_has_native_bf16", lambda: True)
    assert models.pick_device(fast=True) == (cpu, torch.float32)


def test_dtype_rules_on_a_gpu(monkeypatch):
    """On CUDA the target stays fp32 (greedy equality); a draft takes bf16 only where the GPU has it;
    SPECDEC_DTYPE=bfloat16 opts the target in, and is refused where the GPU has no bf16."""
    monkeypatch.setattr(models, "cpu_has_native_bf16", lambda: False)  # a GPU's choice ignores the CPU
    assert models.choose_dtype("cuda", fast=False, forced=None, bf16_supported=True) == torch.float32
    assert models.choose_dtype("cuda", fast=True, forced=None, bf16_supported=True) == torch.bfloat16
    assert models.choose_dtype("cuda", fast=True, forced=None, bf16_supported=False) == torch.float32
    assert models.choose_dtype("cuda", fast=False, forced="bfloat16", bf16_supported=True) == torch.bfloat16
    assert models.choose_dtype("cuda", fast=True, forced="float32", bf16_supported=True) == torch.float32
    with pytest.raises(SpecDecError, match="no bf16 support"):
        models.choose_dtype("cuda", fast=False, forced="bfloat16", bf16_supported=False)
    with pytest.raises(SpecDecError, match="float32 or bfloat16"):
        models.choose_dtype("cpu", fast=False, forced="float16", bf16_supported=True)


def test_kernels_held_below_bf16_read_as_a_cpu_without_bf16_math(monkeypatch):
    monkeypatch.setattr(models, "_cpuinfo", lambda: "flags : avx2 avx512f avx512_bf16")
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    assert models.cpu_has_native_bf16()
    for held in ("AVX2", "avx512_core"):
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", held)
        assert not models.cpu_has_native_bf16()
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")
    assert models.cpu_has_native_bf16()
    monkeypatch.setattr(models, "_cpuinfo", lambda: "flags : avx2")  # no cap grants what the CPU lacks
    assert not models.cpu_has_native_bf16()


def _precision(model) -> str:
    return "int8" if matmul.layout_of(model) == matmul.INT8 else str(model.dtype).removeprefix("torch.")


@pytest.mark.parametrize("fastest", ["bfloat16", "float32", "int8"])
def test_pair_loads_the_draft_fast_and_the_target_exact(tiny_pair_dirs, monkeypatch, fastest, nothing_timed):
    """With bf16 math on the CPU a draft loads in bf16 and keeps whichever of bf16, fp32 in its faster
    layout and int8 weights drafts a token fastest (timed at load; faked here); the target stays fp32
    on a CPU."""
    if fastest == "int8" and not matmul.int8_available():
        pytest.skip("this torch has no int8 weight product")
    monkeypatch.delenv("SPECDEC_DTYPE", raising=False)
    monkeypatch.setattr(models, "cpu_has_native_bf16", lambda: True)
    monkeypatch.setattr(choice, "_pass_seconds",
                        lambda model, **_: 1.0 if _precision(model) == fastest else 2.0)
    pair = ModelPair.load(tiny_pair_dirs["target"], tiny_pair_dirs["draft"])
    if torch.cuda.is_available():
        assert pair.target.model.dtype == pair.draft.model.dtype == torch.bfloat16
    else:
        assert pair.target.model.dtype == torch.float32 and matmul.layout_of(pair.target.model) != matmul.INT8
        assert _precision(pair.draft.model) == fastest
    ids = pair.encode_prompt("def add(a, b):", chat=False, max_new_tokens=12)
    result = generate(pair, ids, Settings(gamma=3, max_new_tokens=12))
    assert len(result.token_ids) == 12 and result.rounds


def test_cpu_models_attend_with_grouped_key_value_heads_and_the_same_logits(tiny_pair_dirs, monkeypatch):
    """On a CPU a masked pass over several tokens runs SDPA on the grouped key/value heads as stored
    (transformers' TRANSFORMERS_SDPA_FORCE_GQA) rather than copied per query group: the same logits."""
    if torch.cuda.is_available():
        pytest.skip("on CUDA transformers' own choice stands")
    monkeypatch.delenv("TRANSFORMERS_SDPA_FORCE_GQA", raising=False)
    loaded = models.load_model(tiny_pair_dirs["target"])
    assert os.environ["TRANSFORMERS_SDPA_FORCE_GQA"] == "1"
    config = loaded.model.config
    assert config.num_key_value_heads < config.num_attention_heads  # grouped, as SmolLM2's are
    logits = {}
    for flag in ("0", "1"):
        monkeypatch.setenv("TRANSFORMERS_SDPA_FORCE_GQA", flag)
        cached = CachedModel(loaded.model, config.vocab_size)
        cached.extend(list(range(3, 20)))
        logits[flag] = cached.extend([21, 22, 23, 24])  # four new tokens after a cache: a masked pass
    assert torch.equal(logits["0"], logits["1"])


def test_out_of_memory_moving_a_model_is_one_clear_line(tiny_pair_dirs, monkeypatch):
    def no_room(self, *args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(torch.nn.Module, "to", no_room)
    with pytest.raises(SpecDecError, match="out of memory on the GPU while moving model .* a smaller pair"):
        models.load_model(tiny_pair_dirs["target"])
