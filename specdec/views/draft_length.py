"""Why a round drafted as many tokens as it did, in words a student can check against the numbers."""

from __future__ import annotations

from specdec.config import Settings
from specdec.core.drafters import costs_up_to, stop_thresholds
from specdec.core.records import STOP_BUDGET, STOP_CAP, STOP_CONFIDENCE, STOP_NO_MATCH, RoundTrace
from specdec.core.rounds import priced_passes


def running_confidence(trace: RoundTrace) -> list[float]:
    """After each draft: the product of the draft's top probabilities so far, the adaptive rule's
    estimate that every draft up to there survives. Needs the trace's top-token tables."""
    products, product = [], 1.0
    for shown in trace.positions[: trace.num_drafted]:
        product *= max(shown.draft_probs)
        products.append(product)
    return products


def why_drafting_stopped(trace: RoundTrace, settings: Settings) -> str:
    k, cap = trace.num_drafted, trace.draft_cap
    if trace.draft_stop == STOP_CONFIDENCE:
        threshold = settings.draft_threshold if trace.stop_threshold is None else trace.stop_threshold
        floor = settings.draft_threshold if k else 0.0  # the first draft's drafting step is already paid
        price = (f"{floor:.2f} for drafting it and {threshold - floor:.2f} for what it adds to the "
                 f"target's pass on this machine" if threshold - floor >= 0.005 else "the drafting step")
        then = (f"so the drafter stopped after {k}, and the target takes over." if k else
                "so nothing was drafted: this round is a plain step of the target.")
        # Short sentences: the round view reads this to a class.
        return (f"Adaptive length. One more draft would have brought the chance that every draft "
                f"survives to **{trace.stop_confidence:.2f}**. That is below what it costs, "
                f"**{threshold:.2f}** ({price}). The drafts after it would not have paid that back, "
                f"{then}")
    if trace.draft_stop == STOP_BUDGET:
        return f"The token budget leaves room for {k} draft(s) and the target's own token."
    if trace.draft_stop == STOP_NO_MATCH:
        return ("The n-gram lookup found nothing to copy beyond this." if k else
                "The n-gram lookup found no earlier occurrence of the last tokens: nothing to copy.")
    assert trace.draft_stop == STOP_CAP, trace.draft_stop
    if settings.adaptive and cap < settings.gamma:
        return (f"It reached this round's cap, **{cap}**. With adaptive length the cap follows "
                f"acceptance: two more after a round whose every draft survived, one fewer after a "
                f"rejection, never above γ = {settings.gamma}.")
    return f"It reached the cap, γ = **{cap}**."


def draft_prices(pass_costs: tuple[float, ...], settings: Settings) -> list[dict]:
    """Per draft a round may make: the pass that verifies it, what that pass costs here in plain steps
    (timed at load), what the draft adds to it, and the chance of surviving it must beat."""
    priced_by = priced_passes(settings, pass_costs)
    thresholds = stop_thresholds(settings.draft_threshold, priced_by, settings.gamma)
    costs = costs_up_to(priced_by, settings.gamma + 1)
    return [{"draft": i + 1, "tokens in the pass": i + 2,  # draft i + 1, the drafts before it, the last token
             "pass cost (plain steps)": round(costs[i + 1], 2),
             "added by this draft": round(threshold - (settings.draft_threshold if i else 0.0), 2),
             "chance it must beat": round(threshold, 2)}
            for i, threshold in enumerate(thresholds)]
