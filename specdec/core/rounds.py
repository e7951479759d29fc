"""The round loop of speculative decoding, and plain target-only decoding through the same model code.

Both are generators that yield one record per target pass, so a CLI can stream them, an app can
step through them, and metrics can be computed from them afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

import torch

from specdec import clock
from specdec.config import SamplingConfig, Settings, tree_nodes
from specdec.core import stopwatch
from specdec.core.acceptance import RULES, Rule, Verdict, greedy_accept, greedy_expected
from specdec.core.cached_model import CachedModel
from specdec.core.drafters import Draft, Drafter, LookupThenModelDrafter, ModelDrafter, stop_thresholds
from specdec.core.records import (
    STOP_BUDGET,
    STOP_CAP,
    CacheLengths,
    RoundTrace,
    ShownDistribution,
    TargetStep,
)
from specdec.core.sampling import sample, warp_probs
from specdec.core.tree_rounds import tree_rounds
from specdec.core.tree_shape import shape_for

SHOWN_TOKENS = 8  # how many top tokens of p, q and the residual a trace keeps per position
# The round's stages, as core.stopwatch names them when someone measures where the time goes.
DRAFT, VERIFY, ACCEPT, ROLLBACK, TRACE = "draft", "verify", "warp + accept", "roll-back", "trace"
PREFILL = "prefill"  # once per run, before the first round


def _top_ids(probs: torch.Tensor, count: int) -> set[int]:
    return set(probs.topk(min(count, probs.shape[-1])).indices.tolist())


def shown_distribution(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None,
    residual: torch.Tensor | None,
    marked_tokens: list[int],
) -> ShownDistribution:
    """`marked_tokens` (the drafted token, the token drawn here) are shown even if not in a top list."""
    ids = _top_ids(target_probs, SHOWN_TOKENS) | set(marked_tokens)
    for extra in (draft_probs, residual):
        if extra is not None:
            ids |= _top_ids(extra, SHOWN_TOKENS)
    order = sorted(ids, key=lambda t: -float(target_probs[t]))
    index = torch.tensor(order, dtype=torch.long)

    def at(probs: torch.Tensor | None) -> list[float] | None:
        return None if probs is None else probs[index].tolist()

    return ShownDistribution(order, at(target_probs), at(draft_probs), at(residual))


def round_trace(
    index: int,
    context_length: int,
    draft: Draft,
    target_probs: torch.Tensor | None,
    verdict: Verdict,
    emitted: list[int],
    draft_seconds: float,
    verify_seconds: float,
    caches: CacheLengths,
    draft_cap: int,
    draft_stop: str,
    expected_accept: torch.Tensor,
) -> RoundTrace:
    """The round as plain data; without `target_probs` (a lean run) no top-token tables are built."""
    drafted, k = draft.tokens, len(draft.tokens)

    def marked(i: int) -> list[int]:
        drafted_here = [int(drafted[i])] if i < k else []
        return drafted_here + ([verdict.next_token] if i == verdict.num_accepted else [])

    positions = [] if target_probs is None else [
        shown_distribution(
            target_probs[i],
            draft.probs[i] if i < k else None,
            verdict.residual if i == verdict.num_accepted else None,
            marked(i),
        )
        for i in range(k + 1)
    ]
    return RoundTrace(
        index=index,
        context_length=context_length,
        drafted_tokens=drafted.tolist(),
        positions=positions,
        draft_token_probs=verdict.draft_token_probs.tolist(),
        target_token_probs=verdict.target_token_probs.tolist(),
        accept_probs=verdict.accept_probs.tolist(),
        uniforms=None if verdict.uniforms is None else verdict.uniforms.tolist(),
        num_accepted=verdict.num_accepted,
        next_token=verdict.next_token,
        is_bonus=verdict.is_bonus,
        emitted_tokens=emitted,
        draft_seconds=draft_seconds,
        verify_seconds=verify_seconds,
        caches=caches,
        draft_cap=draft_cap,
        draft_stop=draft_stop,
        stop_confidence=draft.stop_confidence,
        stop_threshold=draft.stop_threshold,
        drafted_by=draft.source,
        head_read=draft.head_read if draft.head_read is None or target_probs is None else replace(
            draft.head_read, feature=[round(v, 4) for v in draft.read_feature.tolist()]),
        rule=verdict.rule,
        target_draws=None if verdict.target_draws is None else verdict.target_draws.tolist(),
        thresholds=None if verdict.thresholds is None else verdict.thresholds.tolist(),
        expected_accept=expected_accept.tolist(),
    )


def prefill(model: CachedModel, tokens: list[int], chunk_size: int = 0) -> Iterator[int]:
    """Feed the prompt but its last token (each step feeds that itself, with the drafts, if any).

    Tokens the cache already holds are skipped. With `chunk_size` > 0 the prompt goes in passes of
    that many tokens (chunked prefill, as serving engines do) and the number of tokens cached is
    yielded after each, so a server can let other sessions use the model in between.
    """
    end = len(tokens) - 1
    while model.cache_length < end:
        start = model.cache_length
        stop = min(end, start + chunk_size) if chunk_size > 0 else end
        model.extend(tokens[start:stop], keep_last=1)
        yield stop


def cut_after_stop(tokens: list[int], stop_token_ids: set[int]) -> tuple[list[int], bool]:
    for i, token in enumerate(tokens):
        if token in stop_token_ids:
            return tokens[: i + 1], True
    return tokens, False


def next_draft_cap(cap: int, draft: Draft, num_accepted: int, gamma: int) -> int:
    """Across rounds the cap follows acceptance, as in transformers' assisted generation: two more
    after a round whose every draft survived up to the cap, one fewer after a rejection (1 to γ)."""
    if len(draft.tokens) == cap and num_accepted == cap:
        return min(gamma, cap + 2)
    if num_accepted < len(draft.tokens):
        return max(1, cap - 1)
    return cap


def priced_passes(settings: Settings, pass_costs: Sequence[float]) -> Sequence[float]:
    """The pass costs a round prices its drafts and a tree its nodes by: none where Settings.price_drafts
    is off (short passes then count as free)."""
    return pass_costs if settings.price_drafts else ()


def draft_thresholds(settings: Settings, pass_costs: Sequence[float]) -> list[float]:
    """What each draft's chance of surviving must beat (core.drafters.stop_thresholds), priced with
    the target's `pass_costs` here unless told not to; none without an adaptive draft length."""
    if not settings.adaptive:
        return []
    return stop_thresholds(settings.draft_threshold, priced_passes(settings, pass_costs), settings.gamma)


def judge(
    rule: Rule, greedy: bool, draft: Draft, target_probs: torch.Tensor, generator: torch.Generator
) -> tuple[Verdict, torch.Tensor]:
    """Step 3 of a round: the rule's verdict on the drafts (at temperature 0, the greedy rule's), and
    the chance it had of keeping each draft, from p and q (RoundTrace.expected_accept).

    The greedy rule reads argmaxes, taken where p and q are (a GPU's memory, if the models are there):
    only ids and p and q at the drafts come to the host. The other rules draw with the run's generator,
    which lives on the CPU so that a seed replays on any device, so p and q come to the host for them.
    """
    k = len(draft.tokens)
    if greedy:
        verdict = replace(greedy_accept(draft.tokens, draft.probs, target_probs), rule=rule.name)
        return verdict, greedy_expected(draft.probs, target_probs[:k])
    draft_probs, target_probs = draft.probs.cpu(), target_probs.cpu()
    verdict = rule.accept(draft.tokens, draft_probs, target_probs, generator)
    return verdict, rule.expected(draft_probs, target_probs[:k])


def verify(target: CachedModel, chain: list[int]) -> torch.Tensor:
    """Step 2 of a round: one target pass over [last token, x_1..x_k] -> logits (k + 1, vocab); the
    cache then holds them all."""
    return target.extend(chain)


def takes_trees(target: CachedModel, drafter: Drafter) -> bool:
    """Whether a round can verify a tree (Settings.tree): a draft model drafts it (core.tree_rounds; after
    a lookup that found nothing to copy, if asked), and both models' attention reads a tree's mask.
    Otherwise (a feature head, lookup alone) rounds verify chains."""
    model = drafter.model if isinstance(drafter, LookupThenModelDrafter) else drafter
    return isinstance(model, ModelDrafter) and target.takes_trees and model.cached.takes_trees


def speculative_rounds(
    target: CachedModel,
    drafter: Drafter,
    prompt_ids: list[int],
    settings: Settings,
    generator: torch.Generator,
    stop_token_ids: set[int] = frozenset(),
    detail: bool = True,
) -> Iterator[RoundTrace]:
    """Draft up to γ tokens, verify them in one target pass, keep the accepted ones; repeat.

    With `settings.adaptive`, a round drafts while the next draft's chance of surviving pays for it
    (core.drafters.stop_thresholds, with what the target's passes cost on this machine) up to the cap,
    which moves with acceptance (next_draft_cap); it may draft nothing, a plain step. `detail` = False
    skips the top-token tables a teacher shows (RoundTrace.positions), for runs nobody watches round by
    round.
    """
    if tree_nodes(settings.tree) != 0 and takes_trees(target, drafter):
        shape = shape_for(tree_nodes(settings.tree), settings.sampling.temperature,
                          priced_passes(settings, target.pass_costs), settings.draft_threshold,
                          settings.gamma)
        lookup = drafter.lookup if isinstance(drafter, LookupThenModelDrafter) else None
        yield from tree_rounds(target, drafter.cached, prompt_ids, settings, shape, generator, stop_token_ids,
                               detail, lookup)
        return
    gamma, sampling, max_new_tokens = settings.gamma, settings.sampling, settings.max_new_tokens
    rule = RULES[settings.rule]  # speculative sampling unless asked otherwise; greedy mode ignores it
    thresholds = draft_thresholds(settings, target.pass_costs)
    tokens = list(prompt_ids)
    # Invariant at the start of every round: the target has seen all tokens but the last one.
    with stopwatch.stage(PREFILL):
        for _ in prefill(target, tokens):
            pass
    num_new, index, cap = 0, 0, gamma
    while num_new < max_new_tokens:
        # Leave room for the one token the target always adds, so we never overshoot the budget.
        k = min(cap, max_new_tokens - num_new - 1)

        # 1. Draft: up to k tokens, each with the distribution q it was drawn from.
        start = clock.now()
        target_before, draft_before = target.cache_length, drafter.cache_length
        with stopwatch.stage(DRAFT):
            draft = drafter.propose(tokens, k, sampling, generator, thresholds)
        draft_drafted = drafter.cache_length
        drafted = clock.now()

        # 2. Verify: one target pass over [last token, x_1..x_k] gives p at all k + 1 positions.
        with stopwatch.stage(VERIFY):
            logits = verify(target, [tokens[-1], *draft.tokens.tolist()])
        target_verified = target.cache_length

        # 3. Accept or reject each draft; emit the replacement or the bonus token.
        with stopwatch.stage(ACCEPT):
            target_probs = warp_probs(logits, sampling)  # p at the drafts' positions and after them
            verdict, expected = judge(rule, sampling.greedy, draft, target_probs, generator)
        verified = clock.now()

        accepted = draft.tokens[: verdict.num_accepted].tolist()
        emitted, stopped = cut_after_stop([*accepted, verdict.next_token], stop_token_ids)
        context_length = len(tokens)
        tokens += emitted
        num_new += len(emitted)

        # 4. Roll back both KV caches: keep the context and the accepted drafts, drop the rest.
        #    (The emitted last token is fed at the start of the next round.)
        with stopwatch.stage(ROLLBACK):
            surviving = context_length + verdict.num_accepted
            target.rollback(surviving)
            drafter.rollback(surviving)
        caches = CacheLengths(target_before, target_verified, target.cache_length,
                              draft_before, draft_drafted, drafter.cache_length)
        stop = STOP_BUDGET if draft.stop == STOP_CAP and k < cap else draft.stop

        with stopwatch.stage(TRACE):
            trace = round_trace(
                index, context_length, draft, target_probs if detail else None, verdict,
                emitted, drafted - start, verified - drafted, caches, cap, stop, expected,
            )
        yield trace
        index += 1
        if stopped:
            return
        if settings.adaptive:
            cap = next_draft_cap(cap, draft, verdict.num_accepted, gamma)


def target_only_steps(
    target: CachedModel,
    prompt_ids: list[int],
    sampling: SamplingConfig,
    generator: torch.Generator,
    max_new_tokens: int,
    stop_token_ids: set[int] = frozenset(),
) -> Iterator[TargetStep]:
    """Plain decoding, the baseline: one target pass per token, through the same CachedModel."""
    tokens = list(prompt_ids)
    for _ in prefill(target, tokens):
        pass
    for index in range(max_new_tokens):
        start = clock.now()
        probs = warp_probs(target.extend(tokens[-1:]), sampling)  # (1, vocab)
        token = int(sample(probs, sampling, generator))
        tokens.append(token)
        yield TargetStep(index, token, clock.now() - start)
        if token in stop_token_ids:
            return
