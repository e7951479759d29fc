"""A model plus one batch's KV cache, for rows that each keep their own number of tokens.

Rows of a batch accept different numbers of drafts, so after a round their sequences have different
lengths. This cache stays rectangular: transformers' own `DynamicCache` holds one (rows, columns)
block per layer, and a per-row validity mask, passed to the model as its 2D `attention_mask`, says
which columns each row really holds. New tokens get per-row `position_ids` (the number of valid
tokens before them), so RoPE sees each row's sequence as if it were alone.

- A roll-back (`rollback`) marks a row's rejected drafts invalid instead of moving anything. The
  columns that every row rejected are cropped off the end; the others stay as masked holes.
- Rows of unequal new tokens (a long and a short prompt, three drafts and none) are right-padded with
  masked columns.

Why masks and not "crop per row, then pad": cropping per row would have to shift every layer's keys
and values of the rows that kept more, once per round, and write machinery transformers already has.
With masks a round moves no cache memory; the price is that attention also reads the holes (masked),
which at these lengths (a prompt and under a hundred new tokens) costs far less than a copy. A row
that finishes leaves the batch (`keep`): its row of every layer is dropped, so it costs nothing more.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache, PreTrainedModel

from specdec.core.cached_model import ReducedHead, linear_kind

ALL, LAST, NONE = "all", "last", "none"  # which new positions' logits extend() returns
PAD_ID = 0  # the token id fed in padding columns: any id will do, no valid position reads them


class BatchCachedModel:
    """Feeds tokens to `model` for several rows at once, each row with its own sequence length."""

    def __init__(self, model: PreTrainedModel, vocab_size: int, rows: int, head: ReducedHead | None = None,
                 pass_costs: tuple[float, ...] = ()):
        self.model = model
        self.pass_costs = pass_costs  # a single row's (CachedModel.pass_costs): how drafts are priced
        self.vocab_size = vocab_size  # logits are cut to the shared tokenizer's vocabulary
        self.head = head  # None: the model's own full head
        self.linear = linear_kind(model)  # the class of its linear layers; a reduced head takes it
        self.cache = DynamicCache(config=model.config)
        self.valid = torch.zeros(rows, 0, dtype=torch.long, device=model.device)  # (rows, columns) 1 = held

    @property
    def rows(self) -> int:
        return self.valid.shape[0]

    @property
    def lengths(self) -> list[int]:
        """How many tokens each row has seen (and holds keys/values for)."""
        return self.valid.sum(dim=1).tolist()

    @torch.inference_mode()
    def extend(self, new_tokens: list[list[int]], keep: str = ALL) -> list[torch.Tensor | None]:
        """Feed each row its new tokens (maybe none) in one forward pass -> per row, the logits of its
        new positions (n_row, vocab), float32, on the model's device as CachedModel.extend's (`keep` =
        LAST: of its last one only, (1, vocab); NONE: no logits, for a prefill); None for a row fed
        nothing."""
        if len(new_tokens) != self.rows:
            raise ValueError(f"{len(new_tokens)} rows of tokens for a batch of {self.rows}")
        width = max(len(tokens) for tokens in new_tokens)
        if width == 0:
            return [None] * self.rows
        device = self.model.device
        input_ids = torch.full((self.rows, width), PAD_ID, dtype=torch.long)
        new_valid = torch.zeros(self.rows, width, dtype=torch.long)
        for row, tokens in enumerate(new_tokens):
            input_ids[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
            new_valid[row, : len(tokens)] = 1
        new_valid = new_valid.to(device)
        # Row r's new tokens sit at positions length_r, length_r + 1, ... of its own sequence.
        position_ids = self.valid.sum(dim=1, keepdim=True) + torch.arange(width, device=device)
        self.valid = torch.cat([self.valid, new_valid], dim=1)  # (rows, columns + width)
        if bool(self.valid.all()):
            # No hole and no padding (always so for a batch of one): the plain causal pass, exactly
            # the single-sequence loop's, without building a mask.
            masks = {}
        else:
            masks = {"attention_mask": self.valid, "position_ids": position_ids}
        hidden = self.model.get_decoder()(input_ids=input_ids.to(device), cache=self.cache, use_cache=True,
                                          **masks).last_hidden_state  # (rows, width, hidden)
        if keep == NONE:
            return [None] * self.rows
        counts = [len(tokens) for tokens in new_tokens]
        if keep == LAST:
            kept = torch.cat([hidden[row, count - 1 : count] for row, count in enumerate(counts) if count])
            counts = [min(count, 1) for count in counts]
        else:
            kept = torch.cat([hidden[row, :count] for row, count in enumerate(counts)])  # (Σ n_row, hidden)
        if self.head is not None:
            scores = self.head.logits(kept, self.vocab_size, self.linear)
        else:
            scores = self.model.get_output_embeddings()(kept)[:, : self.vocab_size].float()
        return [part if count else None for part, count in zip(scores.split(counts), counts, strict=True)]

    def rollback(self, lengths: list[int]) -> None:
        """Row r forgets every token after its first `lengths[r]`; columns no row holds any more are
        cropped off the end of the cache."""
        keep = torch.tensor(lengths, device=self.valid.device)[:, None]
        self.valid = self.valid * (self.valid.cumsum(dim=1) <= keep)
        held = self.valid.any(dim=0).nonzero()
        columns = int(held[-1]) + 1 if len(held) else 0
        excess = self.valid.shape[1] - columns
        if excess > 0:
            self.cache.crop(-excess)  # transformers >= 5 takes the number of tokens to remove
            self.valid = self.valid[:, :columns]

    def keep(self, rows: list[int]) -> None:
        """Only these rows stay in the batch (in this order): the others have finished."""
        if rows == list(range(self.rows)):
            return
        index = torch.tensor(rows, dtype=torch.long, device=self.valid.device)
        if self.cache.get_seq_length() > 0:
            self.cache.batch_select_indices(index)
        self.valid = self.valid[index]
