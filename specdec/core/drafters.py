"""Drafters: the cheap guessers. Each proposes k tokens with the distribution q it drew them from.

Every drafter has the same two methods, so adding a way of drafting is adding a class:
    propose(token_ids, num_tokens, sampling, generator, threshold=0.0) -> Draft
    rollback(length)   # after verification: only the first `length` tokens of the sequence survived
and say how many tokens their cache holds (`cache_length`, None without a cache).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from transformers import PreTrainedModel

from specdec.config import SamplingConfig
from specdec.core.cached_model import CachedModel, ReducedHead
from specdec.core.records import DRAFTED_BY_LOOKUP, DRAFTED_BY_MODEL, STOP_CAP, STOP_CONFIDENCE, STOP_NO_MATCH
from specdec.core.sampling import sample, warp_probs


@dataclass(frozen=True)
class Draft:
    tokens: torch.Tensor  # (k,) drafted token ids; k may be smaller than asked (even 0)
    probs: torch.Tensor  # (k, vocab) q: the distribution each token was drawn from
    stop: str = STOP_CAP  # why no more were drafted (records.STOP_*)
    stop_confidence: float | None = None  # with STOP_CONFIDENCE: the product that fell below the threshold
    source: str = DRAFTED_BY_MODEL  # who proposed the tokens (records.DRAFTED_BY_*)


class Drafter(Protocol):
    name: str

    def propose(
        self,
        token_ids: list[int],
        num_tokens: int,
        sampling: SamplingConfig,
        generator: torch.Generator,
        threshold: float = 0.0,
    ) -> Draft: ...

    def rollback(self, length: int) -> None: ...

    @property
    def cache_length(self) -> int | None: ...


class ModelDrafter:
    """A small causal LM sharing the target's tokenizer, with a KV cache of its own."""

    def __init__(
        self,
        model: PreTrainedModel,
        vocab_size: int,
        name: str = "draft model",
        head: ReducedHead | None = None,
    ):
        self.name = name
        self.cached = CachedModel(model, vocab_size, head)

    def propose(self, token_ids, num_tokens, sampling, generator, threshold=0.0) -> Draft:
        """Up to `num_tokens` drafts; with `threshold` > 0, stop before the draft whose proposal would
        make the chance that all drafts survive, estimated as the product of the draft's top
        probabilities (this draft is well calibrated: see the README), fall below it. The stop
        depends on q alone, never on the target, so the output distribution stays the target's."""
        tokens, probs = [], []
        if num_tokens == 0:
            return self._draft(tokens, probs, STOP_CAP)
        # Feed whatever the draft has not seen yet. Usually that is only the last token; after a
        # round where every draft was accepted it is also the last draft (proposed, never fed).
        logits = self.cached.extend(token_ids[self.cached.cache_length :], keep_last=1)
        confidence = 1.0
        for i in range(num_tokens):
            step_probs = warp_probs(logits, sampling)  # (1, vocab)
            confidence *= float(step_probs.max())
            if confidence < threshold:
                return self._draft(tokens, probs, STOP_CONFIDENCE, confidence)
            token = sample(step_probs, sampling, generator)  # (1,)
            tokens.append(token)
            probs.append(step_probs)
            if i + 1 < num_tokens:  # the last draft need not be fed: nothing is drafted after it
                logits = self.cached.extend(token.tolist())
        return self._draft(tokens, probs, STOP_CAP)

    def _draft(self, tokens: list, probs: list, stop: str, confidence: float | None = None) -> Draft:
        if not tokens:
            return Draft(torch.empty(0, dtype=torch.long), torch.empty(0, self.cached.vocab_size), stop,
                         confidence)
        return Draft(torch.cat(tokens), torch.cat(probs), stop, confidence)

    def rollback(self, length: int) -> None:
        self.cached.rollback(length)

    @property
    def cache_length(self) -> int:
        return self.cached.cache_length


class NgramDrafter:
    """Prompt lookup: find the latest earlier occurrence of the last n tokens and propose what followed.

    No model, no cost. q is a point mass on each proposed token, so the acceptance test becomes
    "accept with probability p(x)" and the residual is p with x removed: the rule stays exact.
    """

    def __init__(self, vocab_size: int, max_ngram: int = 3, min_ngram: int = 2):
        self.name = "n-gram lookup"
        self.vocab_size = vocab_size
        self.max_ngram = max_ngram  # longest suffix tried first: longer matches predict better
        self.min_ngram = min_ngram

    def continuation(self, token_ids: list[int], num_tokens: int) -> list[int]:
        for n in range(self.max_ngram, self.min_ngram - 1, -1):
            if len(token_ids) <= n:
                continue
            suffix = token_ids[-n:]
            # Latest match first; the match may not be the suffix itself.
            for start in range(len(token_ids) - n - 1, -1, -1):
                if token_ids[start : start + n] == suffix:
                    return token_ids[start + n : start + n + num_tokens]
        return []

    def propose(self, token_ids, num_tokens, sampling, generator, threshold=0.0) -> Draft:
        """A lookup is sure of what it proposes (q = 1), so the threshold never stops it."""
        tokens = torch.tensor(self.continuation(token_ids, num_tokens), dtype=torch.long)
        probs = torch.zeros(len(tokens), self.vocab_size)
        probs[torch.arange(len(tokens)), tokens] = 1.0
        return Draft(tokens, probs, STOP_CAP if len(tokens) == num_tokens else STOP_NO_MATCH,
                     source=DRAFTED_BY_LOOKUP)

    def rollback(self, length: int) -> None:
        """Nothing to forget: the lookup reads the sequence afresh every round."""

    @property
    def cache_length(self) -> None:
        """No cache: nothing is remembered between rounds."""
        return None


class LookupThenModelDrafter:
    """Copy when the text repeats itself, else ask the draft model.

    Prompt lookup costs nothing and, where it finds a match (a summary quoting its passage, code
    reusing its names), is often right for several tokens; the model drafts everywhere else. Which
    one drafts depends on the text so far alone, never on the target, so the rule stays exact. The
    model's cache simply falls behind during copied rounds and catches up in one pass next time.
    """

    def __init__(self, lookup: NgramDrafter, model: ModelDrafter):
        self.name = f"n-gram lookup, then {model.name}"
        self.lookup, self.model = lookup, model
        self.cached = model.cached  # the only cache: the model's

    def propose(self, token_ids, num_tokens, sampling, generator, threshold=0.0) -> Draft:
        copied = self.lookup.propose(token_ids, num_tokens, sampling, generator)
        if len(copied.tokens):
            return copied
        return self.model.propose(token_ids, num_tokens, sampling, generator, threshold)

    def rollback(self, length: int) -> None:
        self.model.rollback(length)

    @property
    def cache_length(self) -> int:
        return self.model.cache_length
