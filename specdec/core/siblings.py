"""The draft's second choices, verified in the same target pass as its first: a small tree of drafts.

At temperature 0 a drafted token survives only if it is the target's top token, and where the draft's
first choice is wrong its second is often right. A second choice goes into the verification pass as a
*sibling* of the draft it stands beside: the same position, the same tokens before it, a row of its own
in the attention mask (tree attention, as SpecInfer and EAGLE verify). The chain is judged as always;
if the first rejection falls where a sibling stands and the sibling is the target's top token there,
the round keeps the sibling and the target's top token after it, which the same pass computed: one
token more than the chain alone would have given for that pass.

Greedy decoding only, on by default (Settings.siblings), beside a chain. Trees of drafts at any
temperature, with the rule for several candidates at one position, are core.tree_rounds' (Settings.tree).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from specdec.core.drafters import costs_up_to

# A sibling must be at least this likely to be kept, even where the pass prices it at nothing (a GPU).
SIBLING_FLOOR = 0.05


@dataclass(frozen=True)
class Siblings:
    """Second choices that join a round's verification pass, in the order they are fed after the chain."""

    positions: list[int]  # the drafted positions (0-based) that got one
    tokens: list[int]  # the draft's second choice at each

    def __len__(self) -> int:
        return len(self.positions)

    def parents(self, num_drafted: int) -> list[int]:
        """Each token's parent in the pass [last token, x_1..x_k, siblings]: the node before it (-1: the
        cache). The sibling of draft i (node i + 1) shares that draft's parent, node i."""
        return [-1, *range(num_drafted), *self.positions]

    def kept(self, num_accepted: int, next_token: int) -> int | None:
        """The sibling the round keeps, as an index into this list: the one at the first rejection, if
        it is the token the target chose there. None otherwise."""
        for index, (position, token) in enumerate(zip(self.positions, self.tokens, strict=True)):
            if position == num_accepted and token == next_token:
                return index
        return None


NO_SIBLINGS = Siblings([], [])


def choose_siblings(draft_probs: torch.Tensor, draft_tokens: torch.Tensor, pass_costs: Sequence[float],
                    step_price: float) -> Siblings:
    """The second choices worth their place in the pass, from q (k, vocab) and the drafts (k,).

    A sibling is kept when every draft before it survives and it is the target's token in place of the
    draft it stands beside, a chance estimated as the product of the draft's top probabilities before it
    times q's mass on the sibling (as core.drafters.stop_thresholds estimates a draft's). It pays one
    token and costs what one more token adds to the pass (`pass_costs`, in one-token passes; none
    measured: nothing). It joins, likeliest first, where it lowers what the round's tokens cost on
    average: where its chance beats that cost times the tokens the round expects per pass it costs
    (the drafts' chances plus the one token every pass gives, over the pass and the drafting steps at
    `step_price` each), and never below SIBLING_FLOOR.
    """
    k = draft_tokens.shape[0]
    if k == 0:
        return NO_SIBLINGS
    # The top two of each q, taken where q is (a GPU's memory, if the draft is there): only these
    # (k, 2) and q of each draft come to the host.
    top_probs, top_tokens = (top.cpu() for top in draft_probs.topk(2, dim=-1))
    first = draft_probs[torch.arange(k), draft_tokens].cpu()  # q of each draft
    survive = torch.cumprod(first, 0)  # every draft up to this one survives
    before = torch.cat([torch.ones(1), survive[:-1]])
    drafted_first = top_tokens[:, 0] == draft_tokens  # the draft's own token is one of the two
    second_probs = torch.where(drafted_first, top_probs[:, 1], top_probs[:, 0])
    second_tokens = torch.where(drafted_first, top_tokens[:, 1], top_tokens[:, 0])
    chances = before * second_probs
    costs = costs_up_to(pass_costs, 2 * k + 1)
    expected_tokens, round_cost = 1.0 + float(survive.sum()), costs[k] + step_price * k
    positions, tokens = [], []
    for position in chances.argsort(descending=True).tolist():
        size = k + 1 + len(positions)  # the pass's size before this sibling joins it
        added = costs[size] - costs[size - 1]
        chance = float(chances[position])
        if chance <= max(SIBLING_FLOOR, added * expected_tokens / round_cost):
            break
        positions.append(position)
        tokens.append(int(second_tokens[position]))
        expected_tokens, round_cost = expected_tokens + chance, round_cost + added
    return Siblings(positions, tokens)
