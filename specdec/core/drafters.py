"""Drafters: the cheap guessers. Each proposes k tokens with the distribution q it drew them from.

Every drafter has the same two methods, so adding a way of drafting is adding a class:
    propose(token_ids, num_tokens, sampling, generator, thresholds=()) -> Draft
    rollback(length)   # after verification: only the first `length` tokens of the sequence survived
and say how many tokens their cache holds (`cache_length`, None without a cache).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import torch
from transformers import DynamicCache, PreTrainedModel

from specdec.config import SamplingConfig
from specdec.core.cached_model import CachedModel, ReducedHead, linear_kind
from specdec.core.feature_head import FeatureHead
from specdec.core.records import (
    DRAFTED_BY_HEAD,
    DRAFTED_BY_LOOKUP,
    DRAFTED_BY_MODEL,
    STOP_CAP,
    STOP_CONFIDENCE,
    STOP_NO_MATCH,
    HeadRead,
)
from specdec.core.sampling import sample, warp_probs


@dataclass(frozen=True)
class Draft:
    tokens: torch.Tensor  # (k,) drafted token ids, on the host; k may be smaller than asked (even 0)
    probs: torch.Tensor  # (k, vocab) q: the distribution each token was drawn from, where it was computed
    stop: str = STOP_CAP  # why no more were drafted (records.STOP_*)
    stop_confidence: float | None = None  # with STOP_CONFIDENCE: the product that fell below the threshold
    stop_threshold: float | None = None  # with STOP_CONFIDENCE: that threshold (stop_thresholds)
    source: str = DRAFTED_BY_MODEL  # who proposed the tokens (records.DRAFTED_BY_*)
    head_read: HeadRead | None = None  # a feature head: what it read (its feature list left empty)
    read_feature: torch.Tensor | None = None  # (hidden,) the feature it read, for a trace that shows it


class Drafter(Protocol):
    name: str

    def propose(
        self,
        token_ids: list[int],
        num_tokens: int,
        sampling: SamplingConfig,
        generator: torch.Generator,
        thresholds: Sequence[float] = (),
    ) -> Draft: ...

    def rollback(self, length: int) -> None: ...

    @property
    def cache_length(self) -> int | None: ...


def empty_draft(vocab_size: int, stop: str = STOP_CAP, confidence: float | None = None,
                threshold: float | None = None) -> Draft:
    return Draft(torch.empty(0, dtype=torch.long), torch.empty(0, vocab_size), stop, confidence, threshold)


def stop_thresholds(floor: float, pass_costs: Sequence[float], num_tokens: int) -> list[float]:
    """The chance of survival each draft must beat to be made: thresholds[i] for draft i + 1.

    A draft pays one token when it and every draft before it survive, a chance estimated as the
    product of the draft's top probabilities. It costs its drafting step and what it adds to the
    verification pass. `floor` (Settings.draft_threshold) prices the drafting step, in passes of the
    target over one token; `pass_costs[n - 1]` is what a pass over n tokens costs in the same unit
    (measured at load: specdec/kernels/choice.py), so draft i + 1, the (i + 2)-th token of its pass,
    adds pass_costs[i + 1] - pass_costs[i]. The first draft's drafting step is already paid: its q
    came from feeding the last token, which the drafter must see anyway. Without costs (a GPU, or
    Settings.price_drafts off) passes over a few tokens count as free, as they nearly are where reading
    the weights dominates: the first draft is then always made and the rest must beat `floor`. Where a
    pass over two tokens costs 1.5 plain steps, the first draft is made only when it is more likely than
    not to survive, and a round may draft nothing: a plain decoding step.
    """
    costs = costs_up_to(pass_costs, num_tokens + 1)
    return [(floor if i > 0 else 0.0) + max(0.0, costs[i + 1] - costs[i]) for i in range(num_tokens)]


def costs_up_to(pass_costs: Sequence[float], tokens: int) -> list[float]:
    """What passes over 1 to `tokens` tokens cost, in one-token passes, as stop_thresholds prices
    them: sizes beyond those measured as the largest measured (none measured: all as one token)."""
    costs = list(pass_costs[:tokens]) or [1.0]
    return costs + [costs[-1]] * (tokens - len(costs))


def worth_drafting(confidence: float, chance: float, thresholds: Sequence[float]) -> bool:
    """Whether to make a draft whose survival, with every draft before it, has the chance
    `confidence` (the product of the draft's top probabilities so far; `chance`: its own factor), when
    it and each further draft the round may make must beat `thresholds` (stop_thresholds).

    It is made if drafting up to some length from here is expected to pay, each further draft taken to
    survive with the same `chance` as this one. With equal thresholds that is just `confidence` beating
    the first; with a price paid once (a pass that grows dearer at 4 tokens, then stays level) a sure
    draft goes past it where the drafts beyond pay it back.
    """
    gain = 0.0
    for threshold in thresholds:
        gain += confidence - threshold
        if gain >= 0:
            return True
        confidence *= chance
    return not thresholds


def draft_one_by_one(
    logits: torch.Tensor,
    next_logits: Callable[[int], torch.Tensor],
    num_tokens: int,
    sampling: SamplingConfig,
    generator: torch.Generator,
    thresholds: Sequence[float] = (),
) -> Draft:
    """Up to `num_tokens` drafts from `logits` (1, vocab), asking `next_logits(token)` after each.

    Draft i + 1 is made only while the chance that it and every draft before it survive, estimated as
    the product of the draft's top probabilities, pays for what it costs, `thresholds[i]`
    (worth_drafting, stop_thresholds; none given: never stop early). The stop depends on q alone,
    never on the target, so the output distribution stays the target's.
    """
    tokens, probs = [], []
    confidence, stopped_at = 1.0, None
    for i in range(num_tokens):
        step_probs = warp_probs(logits, sampling)  # (1, vocab)
        chance = float(step_probs.max())
        confidence *= chance
        if i < len(thresholds) and not worth_drafting(confidence, chance, thresholds[i:num_tokens]):
            stopped_at = i
            break
        token = int(sample(step_probs, sampling, generator))  # at T = 0 only the id comes to the host
        tokens.append(token)
        probs.append(step_probs)
        if i + 1 < num_tokens:  # the last draft need not be fed: nothing is drafted after it
            logits = next_logits(token)
    if stopped_at is None:
        stop, why = STOP_CAP, (None, None)
    else:
        stop, why = STOP_CONFIDENCE, (confidence, thresholds[stopped_at])
    if not tokens:
        return empty_draft(logits.shape[-1], stop, *why)
    return Draft(torch.tensor(tokens), torch.cat(probs), stop, *why)


class ModelDrafter:
    """A small causal LM sharing the target's tokenizer, with a KV cache of its own."""

    def __init__(
        self,
        model: PreTrainedModel,
        vocab_size: int,
        name: str = "draft model",
        head: ReducedHead | None = None,
        step: Callable[[DynamicCache, int], torch.Tensor] | None = None,
    ):
        """`step`: a one-token step faster than the library's forward, if the loader has one
        (CachedModel's `step`)."""
        self.name = name
        self.cached = CachedModel(model, vocab_size, head, step=step)

    def propose(self, token_ids, num_tokens, sampling, generator, thresholds=()) -> Draft:
        if num_tokens == 0:
            return empty_draft(self.cached.vocab_size)
        # Feed whatever the draft has not seen yet. Usually that is only the last token; after a
        # round where every draft was accepted it is also the last draft (proposed, never fed).
        logits = self.cached.extend(token_ids[self.cached.cache_length :], keep_last=1)
        return draft_one_by_one(logits, lambda token: self.cached.extend([token]), num_tokens, sampling,
                                generator, thresholds)

    def rollback(self, length: int) -> None:
        self.cached.rollback(length)

    @property
    def cache_length(self) -> int:
        return self.cached.cache_length


class FeatureDrafter:
    """The target's feature head (core.feature_head): drafts from the target's own last hidden state.

    It reads the features the target's CachedModel keeps (`keep_features`) and has a KV cache of its
    own. Positions it computed from the target's features stay cached; positions it drafted from its
    own predicted features are forgotten at every roll-back and read again from the target's.
    """

    def __init__(self, head: FeatureHead, target: CachedModel, reduced: ReducedHead,
                 name: str = "feature head",
                 step: Callable[[DynamicCache, torch.Tensor], torch.Tensor] | None = None):
        self.name = name
        self.head, self.target, self.reduced = head, target, reduced
        self.embeddings = target.model.get_input_embeddings()
        self.cache = DynamicCache(config=head.config)
        self.true_length = 0  # head positions computed from the target's own features
        self.linear = linear_kind(head)  # the reduced head multiplies as the head's layers do
        # `step(cache, fused input (1, 1, hidden))` -> predicted feature (1, hidden): one position
        # through the head's layers, handed in by the loader where it has a faster way than the
        # library's forward (specdec/kernels/decoder_step.py); None: the forward.
        self.step = step

    @torch.inference_mode()
    def _predict(self, next_token_ids: list[int], features: torch.Tensor) -> torch.Tensor:
        """Head positions reading (embedding of each next token, feature) -> predicted features."""
        embeddings = self.embeddings(torch.tensor([next_token_ids], device=features.device))
        if len(next_token_ids) == 1 and self.step is not None:
            return self.step(self.cache, self.head.fuse(embeddings[0], features)[None])
        return self.head(embeddings, features[None], self.cache)[0]

    def _logits(self, feature: torch.Tensor) -> torch.Tensor:
        """The target's output head over the reduced vocabulary (q = 0 elsewhere) -> (1, vocab), in the
        head's linear layers' kind (int8 where they have int8 weights: models.feature_head_files)."""
        return self.reduced.logits(feature, self.target.vocab_size, self.linear)

    def propose(self, token_ids, num_tokens, sampling, generator, thresholds=()) -> Draft:
        verified = self.target.cache_length  # the target holds features for positions 0 .. verified - 1
        if num_tokens == 0 or verified == 0:  # no room left, or a one-token prompt: no feature to read
            return replace(empty_draft(self.target.vocab_size), source=DRAFTED_BY_HEAD)
        # Position i reads (x_{i+1}, f_i): catch up on the positions verified since the last round
        # (at least the last one, whose output the first draft comes from).
        self.rollback(min(self.true_length, verified - 1))
        seen = self.true_length
        predicted = self._predict(token_ids[seen + 1 : verified + 1], self.target.features[seen:verified])
        self.true_length = verified
        feature = predicted[-1:]

        def next_logits(token: int) -> torch.Tensor:
            nonlocal feature
            feature = self._predict([token], feature)  # its own prediction stands in for the target's
            return self._logits(feature)

        draft = draft_one_by_one(self._logits(feature), next_logits, num_tokens, sampling, generator,
                                 thresholds)
        read = HeadRead(position=verified - 1, next_token=token_ids[verified], feature=None)
        return replace(draft, source=DRAFTED_BY_HEAD, head_read=read,
                       read_feature=self.target.features[verified - 1].float().cpu())

    def rollback(self, length: int) -> None:
        """Keep only positions read from the target's features (the drafts' are read again next round)."""
        self.true_length = min(self.true_length, length)
        excess = self.cache.get_seq_length() - self.true_length
        if excess > 0:
            self.cache.crop(-excess)

    @property
    def cache_length(self) -> int:
        """Tokens the head has read, counted as a draft model's cache counts them: position i read
        token i + 1 (and the target's feature of token i), so L positions have read L + 1 tokens."""
        positions = self.cache.get_seq_length()
        return positions + 1 if positions else 0


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

    def propose(self, token_ids, num_tokens, sampling, generator, thresholds=()) -> Draft:
        """A lookup is sure of what it proposes (q = 1), so no threshold stops it."""
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

    def __init__(self, lookup: NgramDrafter, model: ModelDrafter | FeatureDrafter):
        self.name = f"n-gram lookup, then {model.name}"
        self.lookup, self.model = lookup, model
        self.cached = getattr(model, "cached", None)  # a draft model's cache, prefilled with the target's

    def propose(self, token_ids, num_tokens, sampling, generator, thresholds=()) -> Draft:
        copied = self.lookup.propose(token_ids, num_tokens, sampling, generator)
        if len(copied.tokens):
            return copied
        return self.model.propose(token_ids, num_tokens, sampling, generator, thresholds)

    def rollback(self, length: int) -> None:
        self.model.rollback(length)

    @property
    def cache_length(self) -> int:
        return self.model.cache_length
