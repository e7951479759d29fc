"""One token through a Llama-family decoder, the library's modules with the per-call glue written out.

A draft drafts one token at a time, and a two-layer draft spends much of each step outside its
matrix products: transformers' forward builds a causal mask and the rotary tables, dispatches through
its attention interface and wraps every output in records, for two layers. Written out, the glue costs
less (docs/LOG.md, "A drafted token's price within rounds", times both with
`scripts/round_breakdown.py`); the hidden states are the forward's (tests/models/test_decoder_step.py). The
engine's one-token drafting steps go through `decoder_step` (`draft_step_by_hand`), and a feature head's
through `embedded_step` (`head_step_by_hand`), and an early exit's through `shallow_step` and
`embedded_step`; every pass over more tokens, and every pass of the target,
stays the library's own forward. The engine (core.cached_model, core.drafters) is handed these steps
as callables when a run's drafter is made (models.pair); it never imports this module.

It runs the model's own modules (norms, projections and MLPs, so kernels.matmul's layouts and int8
weights apply; the model's rotary embedding; transformers' `apply_rotary_pos_emb`) and its KV cache
(`cache.update`, so roll-back and the library's forward keep working on the same cache). A single
query may see every cached position, so no mask is built.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from transformers import Cache, PreTrainedModel
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

# Decoders whose layers are exactly Llama's: pre-norm attention and MLP, rotary positions, no
# sliding window, no norms on the queries and keys. Others take the library's forward.
STEPPED_MODEL_TYPES = ("llama",)


def steps_by_hand(model: PreTrainedModel) -> bool:
    """Whether a draft's one-token steps go through `decoder_step`: for Llama-family decoders, unless
    SPECDEC_DRAFT_STEP=library asks for the library's forward (to time the two against each other)."""
    return getattr(model.config, "model_type", None) in STEPPED_MODEL_TYPES and not library_steps_asked()


def library_steps_asked() -> bool:
    """SPECDEC_DRAFT_STEP=library: drafting steps through the library's forward, for drafts and heads."""
    return os.environ.get("SPECDEC_DRAFT_STEP") == "library"


def draft_step_by_hand(model: PreTrainedModel) -> Callable[[Cache, int], torch.Tensor] | None:
    """A draft's one-token step by hand, (cache, token id) -> last hidden state (1, hidden), for
    core.cached_model.CachedModel's `step`; None where the library's forward must run it."""
    return functools.partial(decoder_step, model) if steps_by_hand(model) else None


def head_step_by_hand(head: nn.Module) -> Callable[[Cache, torch.Tensor], torch.Tensor] | None:
    """A feature head's one-position step by hand, (cache, fused input (1, 1, hidden)) -> predicted
    feature (1, hidden), for core.drafters.FeatureDrafter's `step`; None for a head that reads the
    target's earlier layers (it drafts through its forward) or under SPECDEC_DRAFT_STEP=library."""
    if head.layer_fc is not None or library_steps_asked():
        return None
    return functools.partial(embedded_step, head.decoder)


@torch.inference_mode()
def decoder_step(model: PreTrainedModel, cache: Cache, token_id: int) -> torch.Tensor:
    """Feed one token after the `cache`d ones -> the decoder's last hidden state (1, hidden), as
    `model.get_decoder()(...)` computes it; its keys and values are added to `cache`."""
    decoder = model.get_decoder()
    embedding = decoder.embed_tokens(torch.tensor([[token_id]], device=model.device))  # (1, 1, hidden)
    return embedded_step(decoder, cache, embedding)


@torch.inference_mode()
def embedded_step(decoder: nn.Module, cache: Cache, hidden: torch.Tensor) -> torch.Tensor:
    """One position's input (1, 1, hidden) after the `cache`d ones, through a Llama decoder's layers and
    final norm -> (1, hidden), as `decoder(inputs_embeds=hidden, ...)` computes it. A draft feeds it a
    token's embedding (`decoder_step`); a feature head, the embedding fused with a feature
    (core.feature_head.FeatureHead.fuse)."""
    return decoder.norm(layers_step(decoder.layers, decoder.rotary_emb, cache, hidden))[0]


@torch.inference_mode()
def shallow_step(decoder: nn.Module, layers: nn.ModuleList, cache: Cache, token_id: int) -> torch.Tensor:
    """An early exit's drafting step (core.early_exit): a token's embedding in the target's `decoder`,
    through `layers` (its first L layers, or a rounded copy of them) on the first L layers of the
    target's `cache` -> the state after layer L (1, 1, hidden), before any norm."""
    embedding = decoder.embed_tokens(torch.tensor([[token_id]], device=decoder.embed_tokens.weight.device))
    return layers_step(layers, decoder.rotary_emb, cache, embedding)


def layers_step(layers: nn.ModuleList, rotary_emb: nn.Module, cache: Cache, hidden: torch.Tensor
                ) -> torch.Tensor:
    """One position (1, 1, hidden) after the `cache`d ones through Llama decoder `layers` (cache layers
    0, 1, ... in turn) -> the last layer's output (1, 1, hidden)."""
    position_ids = torch.tensor([[cache.get_seq_length()]], device=hidden.device)
    cos, sin = rotary_emb(hidden, position_ids)
    for index, layer in enumerate(layers):
        attention = layer.self_attn
        normed = layer.input_layernorm(hidden)
        heads = (1, 1, -1, attention.head_dim)  # (batch, position, heads, head_dim)
        query = attention.q_proj(normed).view(heads).transpose(1, 2)
        key = attention.k_proj(normed).view(heads).transpose(1, 2)
        value = attention.v_proj(normed).view(heads).transpose(1, 2)
        query, key = apply_rotary_pos_emb(query, key, cos, sin)
        key, value = cache.update(key, value, index)
        attended = F.scaled_dot_product_attention(query, key, value, scale=attention.scaling, enable_gqa=True)
        hidden = hidden + attention.o_proj(attended.transpose(1, 2).reshape(1, 1, -1))
        hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
    return hidden
