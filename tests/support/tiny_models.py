"""Tiny random causal LMs with a tiny tokenizer, built in the tests: fast, offline, deterministic."""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "for i in range(10):\n    print(i)\n",
    "The quick brown fox jumps over the lazy dog.",
    "Once upon a time there was a small model that guessed the words of a big one.",
] * 20


def tiny_tokenizer(vocab_size: int = 300) -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<eos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<eos>")


def tiny_model(vocab_size: int, seed: int, layers: int = 2, hidden: int = 32) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        eos_token_id=0,
        bos_token_id=0,
        pad_token_id=0,
    )
    model = LlamaForCausalLM(config).eval()
    # Random init gives near-uniform outputs; sharpen them so greedy paths and rejections are real.
    with torch.no_grad():
        model.lm_head.weight.mul_(40.0)
    return model


def save_tiny_model(folder: Path, vocab_size: int, seed: int, tokenizer_vocab: int = 300) -> Path:
    tokenizer = tiny_tokenizer(tokenizer_vocab)
    tiny_model(max(vocab_size, len(tokenizer)), seed).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def sharp_tiny_model(vocab_size: int, seed: int) -> LlamaForCausalLM:
    """A tiny model whose attention is sharp, so that what its cache holds changes its choices (a random
    one attends almost evenly, and its greedy path hardly depends on the context)."""
    model = tiny_model(vocab_size, seed)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(8.0)
            layer.self_attn.k_proj.weight.mul_(8.0)
    return model


def perturbed_copy(model: LlamaForCausalLM, scale: float, seed: int) -> LlamaForCausalLM:
    """A draft that agrees with `model` often but not always: its weights plus Gaussian noise."""
    torch.manual_seed(seed)
    copy = LlamaForCausalLM(model.config).eval()
    copy.load_state_dict(model.state_dict())
    with torch.no_grad():
        for parameter in copy.parameters():
            parameter.add_(scale * parameter.std() * torch.randn_like(parameter))
    return copy


def save_tiny_head(folder: Path, target: LlamaForCausalLM) -> Path:
    """A feature head for `target`, as `train-head` saves one (untrained: it starts from the target's
    last layer, so its drafts are sometimes right)."""
    from specdec.models.feature_head_files import save_head
    from specdec.training.train_feature_head import build_head

    save_head(build_head(target, layers=1), folder, list(range(target.config.vocab_size)), {"tiny": True})
    return folder
