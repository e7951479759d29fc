"""Self-speculation: the target's own first L layers draft for it (early exit, as LayerSkip's).

A draft model is a second network, with weights and a KV cache of its own. An early exit is the target
cut short: a token goes through the target's first L layers only, then the target's own final norm and
output head turn that shallow hidden state into q. No second model to host.

    token -> layers 1..L (the target's) -> final norm (the target's) -> output head -> q      (early:L)
                                        -> adapter (layers and a norm of its own) -> output head -> q
                    \\-> layers L+1..N (the target's, at verification only) -> norm -> head -> p

The shallow layers were never taught to be read by the output head, so the untrained exit (`early:L`)
guesses badly. Kangaroo (Liu et al. 2024) puts a small trained adapter after layer L, which learns to
turn layer L's state into something the head reads well. The adapter here reads the token's embedding
plus a projection of its layer-L state (as the feature head reads the target's last state), through two
decoder layers and a norm that start as the trained draft's, with the projection at zero: it begins as
that draft and learns to use the target's shallow layers too. It attends over earlier positions, so it
keeps a cache of its own: its two layers', a small part of the target's.

The teaching point is the cache. The drafter's layers 1..L *are* the target's, so their keys and values
for every verified token are already in the target's cache: the drafter reads that cache and appends
its drafts' entries to it, beyond the verified tokens. Before the target verifies, it cuts them off
again (the verification pass recomputes those positions through every layer), so after each round the
one cache holds verified tokens only and is rolled back once, by the target.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable

import torch
from torch import nn
from transformers import DynamicCache, LlamaConfig, LlamaModel
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from specdec.core.cached_model import CachedModel, ReducedHead, linear_kind
from specdec.core.drafters import Draft, draft_one_by_one, empty_draft


def adapter_config(target_config: LlamaConfig, exit_layer: int, layers: int = 2) -> LlamaConfig:
    """`layers` decoder layers of the target's shape, reading the hidden state after `exit_layer`; no
    vocabulary of its own (it reads embeddings and states, and the target's head scores its output)."""
    config = copy.deepcopy(target_config)
    config.num_hidden_layers = layers
    config.vocab_size = 1  # the decoder's token table is never used: the adapter feeds inputs_embeds
    config.pad_token_id = config.bos_token_id = config.eos_token_id = None
    config.tie_word_embeddings = False
    config.exit_layer = exit_layer
    config.architectures = ["ExitAdapter"]  # specdec.core.early_exit, not a causal LM
    return config


class ExitAdapter(nn.Module):
    """embedding + fc(norm(state after layer L)) -> decoder layers and final norm -> what the head reads.

    The state is normalised to the embeddings' scale (a fixed one) before the projection: the target's
    shallow states are far larger than its embeddings.
    """

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.config = config
        hidden = config.hidden_size
        self.feature_norm = LlamaRMSNorm(hidden, config.rms_norm_eps)
        self.fc = nn.Linear(hidden, hidden)
        self.decoder = LlamaModel(config)

    @property
    def exit_layer(self) -> int:
        return self.config.exit_layer

    def fuse(self, embeddings: torch.Tensor, shallow: torch.Tensor) -> torch.Tensor:
        """The decoder's input from the tokens' embeddings and their states after layer L (..., hidden)."""
        return embeddings + self.fc(self.feature_norm(shallow))

    def forward(self, embeddings: torch.Tensor, shallow: torch.Tensor, cache=None,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, positions, hidden) each -> (batch, positions, hidden), what the head reads."""
        return self.decoder(inputs_embeds=self.fuse(embeddings, shallow), attention_mask=attention_mask,
                            cache=cache, use_cache=cache is not None).last_hidden_state


@torch.inference_mode()
def shallow_layers(decoder: nn.Module, cache: DynamicCache, token_id: int, layers: int) -> torch.Tensor:
    """One token through the first `layers` of a decoder, after the tokens its `cache` holds ->
    the hidden state after layer `layers` (1, 1, hidden). Its keys and values go into the first
    `layers` of that cache, the deeper layers' are left as they are."""
    device = decoder.embed_tokens.weight.device
    hidden = decoder.embed_tokens(torch.tensor([[token_id]], device=device))
    position_ids = torch.tensor([[cache.get_seq_length(0)]], device=device)
    position_embeddings = decoder.rotary_emb(hidden, position_ids)
    for layer in decoder.layers[:layers]:  # a single query sees every cached position: no mask
        hidden = layer(hidden, position_ids=position_ids, cache=cache, use_cache=True,
                       position_embeddings=position_embeddings)
    return hidden


class EarlyExitDrafter:
    """The target's first L layers, an optional trained adapter, and the target's norm and head.

    It holds no cache for layers 1..L: it runs them on the run's target cache (`target`, a CachedModel),
    through the target's own modules (or a rounded copy the loader hands it as `shallow`), and its only
    cache is the adapter's. The adapter keeps its entries
    for the drafts that survive: it fed them itself, through layers 1..L on the target's cache. For the
    positions it never fed (the prompt; the last draft when every draft survives) it reads the target's
    hidden state after layer L, which the target keeps at every verified position (`keep_layer`).
    """

    def __init__(self, target: CachedModel, layers: int, reduced: ReducedHead | None = None,
                 adapter: nn.Module | None = None, name: str | None = None,
                 step: Callable[[DynamicCache, torch.Tensor], torch.Tensor] | None = None,
                 shallow: Callable[[DynamicCache, int], torch.Tensor] | None = None,
                 linear: type[nn.Linear] | None = None):
        """Where the loader has faster ways than the library's calls: `step(cache, fused input (1, 1,
        hidden))` -> (1, hidden), one position through the adapter's decoder
        (kernels.decoder_step.embedded_step); `shallow(cache, token id)` -> (1, 1, hidden), a token through
        layers 1..L on the target's cache (kernels.decoder_step.shallow_step, maybe through a copy of those
        layers rounded to int8: it changes q, not the cache's verified entries); `linear`, the class the
        reduced head multiplies with (by default its adapter's, or its target's)."""
        if adapter is not None and target.keep_layer != layers:
            raise ValueError("an exit adapter reads the target's layer L: make the target with keep_layer=L")
        self.name = name or f"early exit after layer {layers}"
        self.target, self.layers, self.reduced, self.adapter = target, layers, reduced, adapter
        self.decoder = target.model.get_decoder()
        self.cache = DynamicCache(config=adapter.config) if adapter is not None else None
        self.linear = linear or linear_kind(adapter if adapter is not None else target.model)
        self.step = step
        self.shallow = shallow or functools.partial(shallow_layers, self.decoder, layers=layers)

    def _embeddings(self, token_ids: list[int]) -> torch.Tensor:
        """(1, tokens, hidden): the target's own embeddings of the tokens."""
        table = self.decoder.embed_tokens
        return table(torch.tensor([token_ids], device=table.weight.device))

    @torch.inference_mode()
    def _logits(self, token_id: int) -> torch.Tensor:
        """q's logits (1, vocab) for the token after `token_id`, fed after everything cached."""
        shallow = self.shallow(self.target.cache, token_id)
        if self.adapter is None:
            hidden = self.decoder.norm(shallow)[0]
        elif self.step is not None:
            hidden = self.step(self.cache, self.adapter.fuse(self._embeddings([token_id]), shallow))
        else:
            hidden = self.adapter(self._embeddings([token_id]), shallow, self.cache)[0]
        if self.reduced is not None:
            return self.reduced.logits(hidden, self.target.vocab_size, self.linear)
        return self.target.model.get_output_embeddings()(hidden)[:, : self.target.vocab_size].float()

    @torch.inference_mode()
    def _catch_up(self, token_ids: list[int], verified: int) -> None:
        """The adapter reads the target's layer-L states for the verified positions it has not fed: the
        prompt, and the last draft of a round whose drafts all survived."""
        fed = self.cache.get_seq_length()
        if verified > fed:
            seen = slice(fed, verified)
            self.adapter(self._embeddings(token_ids[seen]), self.target.layer_states[None, seen], self.cache)

    def propose(self, token_ids, num_tokens, sampling, generator, thresholds=()) -> Draft:
        verified = self.target.cache_length  # the target has seen every token but the last
        if num_tokens == 0:
            return empty_draft(self.target.vocab_size)
        if self.adapter is not None:
            self._catch_up(token_ids, verified)
        try:
            return draft_one_by_one(self._logits(token_ids[verified]), self._logits, num_tokens, sampling,
                                    generator, thresholds)
        finally:
            # The drafts' entries leave the shared layers before the target verifies: it recomputes
            # those positions through all its layers, and its cache must hold verified tokens only.
            # The adapter's own entries stay until the roll-back: those of surviving drafts are kept.
            self.target.crop_layers(self.layers, verified)

    def rollback(self, length: int) -> None:
        """Keep the adapter's entries for the first `length` tokens (the drafts that survived, which it
        fed itself through layers 1..L, and what came before)."""
        if self.cache is None:
            return
        excess = self.cache.get_seq_length() - length
        if excess > 0:
            self.cache.crop(-excess)

    @property
    def cache_length(self) -> int:
        """Tokens the drafter has read: the shared layers' (the target's), which the drafts' leave again
        before verification."""
        return self.target.cache.get_seq_length(0)
