"""A model plus one run's KV cache: the only place the engine runs a forward pass.

The weights are shared (loaded once per process); the cache belongs to one run. Both the target and
a model drafter use this class, and so does target-only decoding, so every timing compares like
with like.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from transformers import DynamicCache, PreTrainedModel


def linear_kind(model: nn.Module) -> type[nn.Linear]:
    """The class of `model`'s linear layers: nn.Linear, or the kind the loader gave them on a CPU to
    multiply faster (another matrix layout, int8 weights: specdec/kernels/matmul.py). A reduced head
    takes it, so it multiplies as its model does."""
    return next((type(m) for m in model.modules() if isinstance(m, nn.Linear)), nn.Linear)


class ReducedHead:
    """The output head restricted to a draft's frequent tokens (FR-Spec, Zhao et al. 2025).

    On a CPU the head over 49k tokens costs more than a small draft's layers. Scoring only the tokens
    the target actually writes makes drafting several times cheaper; every other token gets q = 0,
    which the acceptance rule handles like any other q, so the output stays exactly the target's.
    """

    def __init__(self, token_ids: torch.Tensor, weight: torch.Tensor):
        self.token_ids = token_ids  # (n,) vocabulary ids the head scores
        self.columns = token_ids.to(weight.device)  # the same ids where the scores are computed
        # A linear layer over their rows of the output embedding, so it multiplies as its model's layers do.
        self.layer = nn.Linear(weight.shape[1], weight.shape[0], bias=False, device="meta")
        self.layer.weight = nn.Parameter(weight, requires_grad=False)

    @property
    def weight(self) -> torch.Tensor:
        """(n, hidden): the head's rows of the output embedding."""
        return self.layer.weight

    @classmethod
    def of(cls, model: PreTrainedModel, token_ids: list[int]) -> ReducedHead:
        ids = torch.tensor(token_ids, dtype=torch.long)
        weight = model.get_output_embeddings().weight.detach()[ids.to(model.device)].clone()
        return cls(ids, weight)

    def logits(self, hidden: torch.Tensor, vocab_size: int, linear: type[nn.Linear]) -> torch.Tensor:
        """Hidden states (n, hidden) -> logits (n, vocab_size), float32 on the model's device, -inf off
        the head's tokens; multiplied by a linear layer of the class `linear`, its model's (`linear_kind`)."""
        self.layer.__class__ = linear
        scores = self.layer(hidden)
        logits = torch.full((hidden.shape[0], vocab_size), float("-inf"), device=scores.device)
        logits[:, self.columns] = scores.float()
        return logits


# Attention implementations that read a 4D additive mask as given (flash attention takes none).
TREE_ATTENTION = ("sdpa", "eager")


def tree_attention(parents: list[int], cached: int,
                   new: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The mask and positions for feeding a tree of tokens after `cached` ones: token i sees the cache,
    its ancestors and itself. `parents` covers the whole tree (parents come before their children);
    only its last `new` tokens are fed now (all if None), the ones before them were fed by an earlier
    call and sit in the cache right after the `cached` tokens, where each sees only its own ancestors.
    -> (bool mask (1, 1, new, cached + len(parents)), True where attending; position ids (1, new):
    `cached` + depth)."""
    n = len(parents)
    new = n if new is None else new
    sees = torch.zeros(n, n, dtype=torch.bool)
    depth = [0] * n
    for node, parent in enumerate(parents):
        if parent >= 0:
            sees[node] = sees[parent]
            depth[node] = depth[parent] + 1
        sees[node, node] = True
    mask = torch.cat([torch.ones(n, cached, dtype=torch.bool), sees], dim=1)[n - new :]
    return mask[None, None], torch.tensor([depth[n - new :]]) + cached


class CachedModel:
    """Feeds tokens to `model`, remembering them in a KV cache that can be rolled back."""

    def __init__(self, model: PreTrainedModel, vocab_size: int, head: ReducedHead | None = None,
                 keep_features: bool = False, pass_costs: tuple[float, ...] = (),
                 step: Callable[[DynamicCache, int], torch.Tensor] | None = None, keep_layer: int = 0):
        self.model = model
        self.vocab_size = vocab_size  # logits are cut to the shared tokenizer's vocabulary
        self.head = head  # None: the model's own full head
        self.cache = DynamicCache(config=model.config)
        self.linear = linear_kind(model)  # the class of its linear layers; a reduced head takes it
        # keep_features: the last hidden state at every cached position, rolled back with the cache
        # (a feature head drafts from them: core.feature_head).
        self.features = torch.empty(0, model.config.hidden_size, device=model.device, dtype=model.dtype)
        self.keep_features = keep_features
        # keep_layer = L > 0: also the hidden state after decoder layer L at every cached position, rolled
        # back with the cache (an early exit's adapter reads them: core.early_exit).
        self.keep_layer = keep_layer
        self.layer_states = torch.empty_like(self.features)
        # What a pass over 1, 2, ... tokens costs on this machine, in 1-token passes (timed at load:
        # specdec/kernels/choice.py); empty: not measured (the round loop then counts short passes as free).
        self.pass_costs = pass_costs
        # A draft feeds one token at a time. `step(cache, token id)` -> the decoder's last hidden state
        # (1, hidden), handed in for a draft (specdec/kernels/decoder_step.py: the same numbers without
        # the library's per-call glue); None: every pass is the library's forward, as a target's are.
        self.step = step

    @property
    def cache_length(self) -> int:
        """How many tokens the model has seen (and holds keys/values for)."""
        return self.cache.get_seq_length()

    def extend(self, token_ids: list[int], keep_last: int = 0) -> torch.Tensor:
        """Feed new tokens in one forward pass -> next-token logits (positions, vocab), float32, on
        the model's device.

        keep_last > 0 returns only the last positions' logits (a prefill needs one, not hundreds).
        The logits stay where the model computed them: a greedy round takes its argmax and top two
        there and brings back only ids and a few probabilities (core.rounds), while a draw with the
        run's CPU generator brings its distribution to the host (core.sampling), so a seed replays
        identically whatever device the model is on.
        """
        return self._forward(token_ids, keep_last)

    @property
    def takes_trees(self) -> bool:
        """Whether its attention reads the mask `extend_tree` gives (else rounds verify chains)."""
        return self.model.config._attn_implementation in TREE_ATTENTION

    def extend_tree(self, token_ids: list[int], parents: list[int]) -> torch.Tensor:
        """Feed a tree of tokens in one forward pass (core.tree_rounds): token i follows the cache and its
        ancestors (`parents[i]`: the index of the token before it, -1 for the cache's last) -> each
        token's next-token logits (tokens, vocab), float32, on the model's device as `extend`'s. The
        cache then holds every token of the tree, in this order; `keep` picks the path that survived.

        A tree may be fed in several calls (a draft grows one level at a time): `parents` then covers
        every token of the tree fed so far, and `token_ids` are its last ones."""
        earlier = len(parents) - len(token_ids)  # the tree's tokens already in the cache, at its end
        sees, positions = tree_attention(parents, self.cache_length - earlier, len(token_ids))
        device, dtype = self.model.device, self.model.dtype
        # Additive, as eager attention adds it to the scores (it would add a bool mask as 0s and 1s).
        mask = torch.zeros(sees.shape, dtype=dtype).masked_fill(~sees, torch.finfo(dtype).min)
        return self._forward(token_ids, 0, attention_mask=mask.to(device), position_ids=positions.to(device))

    @torch.inference_mode()
    def _forward(self, token_ids: list[int], keep_last: int, **tree) -> torch.Tensor:
        """`extend`'s pass; `tree`: the attention mask and position ids of `extend_tree`, if any."""
        input_ids = torch.tensor([token_ids], device=self.model.device)
        by_hand = self.step is not None and len(token_ids) == 1 and not tree
        if self.head is None and not self.keep_features and not self.keep_layer and not by_hand:
            output = self.model(input_ids=input_ids, cache=self.cache, use_cache=True,
                                logits_to_keep=keep_last, **tree)
            return output.logits[0, :, : self.vocab_size].float()
        # The model's own forward in its two steps (the decoder by `step` for a draft's single token),
        # to keep the first's output or use a reduced head.
        if by_hand:
            hidden = self.step(self.cache, token_ids[0])
        else:
            output = self.model.get_decoder()(input_ids=input_ids, cache=self.cache, use_cache=True,
                                              output_hidden_states=self.keep_layer > 0, **tree)
            hidden = output.last_hidden_state[0]
            if self.keep_layer:  # hidden_states[0] is the embeddings, [n] the output of layer n
                self.layer_states = torch.cat([self.layer_states, output.hidden_states[self.keep_layer][0]])
        if self.keep_features:
            self.features = torch.cat([self.features, hidden])
        hidden = hidden[-keep_last:]  # keep_last = 0 keeps every position
        if self.head is not None:
            return self.head.logits(hidden, self.vocab_size, self.linear)
        return self.model.get_output_embeddings()(hidden)[:, : self.vocab_size].float()

    def keep(self, length: int, then: list[int]) -> None:
        """Keep the first `length` cached tokens, then those at the positions `then` (a path through a
        tree that `extend_tree` fed), and forget the rest."""
        if not then:
            self.rollback(length)
            return
        index = torch.tensor([*range(length), *then], device=self.model.device)
        for layer in self.cache.layers:
            layer.keys = layer.keys.index_select(-2, index)
            layer.values = layer.values.index_select(-2, index)
        if self.keep_features:
            self.features = self.features[index]
        if self.keep_layer:
            self.layer_states = self.layer_states[index]

    def rollback(self, length: int) -> None:
        """Forget every token after the first `length` (the rejected drafts), keeping the rest."""
        excess = self.cache_length - length
        if excess > 0:
            self.cache.crop(-excess)  # transformers >= 5 takes the number of tokens to remove
        self.features = self.features[:length]
        self.layer_states = self.layer_states[:length]

    def crop_layers(self, layers: int, length: int) -> None:
        """Forget what the first `layers` of the cache hold after the first `length` tokens: an early
        exit's drafts (core.early_exit), written into the target's own cache beyond the verified tokens."""
        for layer in self.cache.layers[:layers]:
            excess = layer.get_seq_length() - length
            if excess > 0:
                layer.crop(-excess)

