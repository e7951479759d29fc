"""The rule on trial for several candidates at one position (a token tree's siblings): each of the four
multi-candidate rules (core.tree_rule.TREE_RULES) with its exact law, beside samples and its acceptance.
No Streamlit here.

At a position the target gives p and the draft q (measure.exact.Position). The exact law comes from
enumerating every way the candidates can be drawn, each with its chance, and every outcome of their
tests in turn: kept at rank i, or all rejected and a draw from the last residual. The enumeration is
over the tokens that matter, the `SHOWN` likeliest under p or q; the rest of the vocabulary counts as
one token, "the rest" (with the trial's small top-k there is no rest). Samples run the engine's own
functions (core.tree_rule) on the same p and q, against draws from p alone.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass

import torch

from specdec.core.tree_rule import (
    TREE_RULES,
    TreeRule,
    gumbel_top_k,
    iid_draws,
    keep_chance,
    residual,
    top_of,
    without,
)
from specdec.measure.exact import positions
from specdec.measure.stats import chi_square_two_sample, tv_distance, tv_noise_band, tv_noise_floor

SHOWN = 10  # tokens enumerated one by one; the rest of the vocabulary is one more
REST = "(the rest)"
WIDTHS = (2, 3, 4)  # candidates per position the page offers
NEGLIGIBLE = 1e-15  # a branch of the enumeration less likely than this adds nothing visible

# How each rule's `draw` picks its candidates, for the enumeration: one at a time from q with the
# drawn ones removed (Gumbel-top-k draws exactly so), independently from q, or q's likeliest.
_DRAW_KINDS = {gumbel_top_k: "without", iid_draws: "with", top_of: "top"}


@dataclass(frozen=True)
class Coarse:
    """p and q over the tokens that matter (`ids`, then one more for the rest if it has mass)."""

    target_probs: torch.Tensor  # (n,) float64
    draft_probs: torch.Tensor  # (n,) float64
    ids: tuple[int, ...]  # the vocabulary ids of the first len(ids) entries; the last may be the rest

    @property
    def has_rest(self) -> bool:
        return len(self.target_probs) > len(self.ids)


def coarse(target_probs: torch.Tensor, draft_probs: torch.Tensor, shown: int = SHOWN) -> Coarse:
    """The `shown` tokens likeliest under p or q, p's order first, and the rest as one token."""
    p, q = target_probs.double().cpu(), draft_probs.double().cpu()
    weight = torch.maximum(p, q)
    count = min(shown, int((weight > 0).sum()))
    ids = weight.topk(count).indices.tolist()
    ids.sort(key=lambda i: (-float(p[i]), -float(q[i])))
    index = torch.tensor(ids, dtype=torch.long)
    kept_p, kept_q = p[index], q[index]
    rest_p, rest_q = max(0.0, 1 - float(kept_p.sum())), max(0.0, 1 - float(kept_q.sum()))
    if rest_p > 1e-12 or rest_q > 1e-12:
        kept_p = torch.cat([kept_p, torch.tensor([rest_p], dtype=torch.float64)])
        kept_q = torch.cat([kept_q, torch.tensor([rest_q], dtype=torch.float64)])
    return Coarse(kept_p / kept_p.sum(), kept_q / kept_q.sum(), tuple(ids))


@dataclass(frozen=True)
class TreeLaw:
    law: torch.Tensor  # (n,) what the node emits
    kept_at: tuple[float, ...]  # P(the candidate of rank i is the one kept), i = 0..width-1
    tv: float  # from p

    @property
    def acceptance(self) -> float:
        """P(one of the candidates is kept)."""
        return sum(self.kept_at)


def exact_tree_law(target_probs: torch.Tensor, draft_probs: torch.Tensor, rule: TreeRule,
                   width: int) -> TreeLaw:
    """The law of the token a node with `width` candidates emits under `rule`, by enumeration of every
    draw and every test outcome (p and q small: a Coarse pair)."""
    p0, q0 = target_probs.double(), draft_probs.double()
    kind = _DRAW_KINDS[rule.draw]
    law = torch.zeros_like(p0)
    kept_at = [0.0] * width
    top = top_of(q0, width) if kind == "top" else []

    def visit(rank: int, p, q_judge, q_draw, chance: float) -> None:
        if kind == "top":
            choices = [(top[rank], 1.0)] if rank < len(top) else []
        elif rank < width:
            source = q_draw if kind == "without" else q0
            choices = [(x, float(source[x])) for x in range(len(source)) if source[x] > 0]
        else:
            choices = []
        if not choices:  # every candidate rejected (or none left to draw): the last residual
            law.add_(chance * p)
            return
        left = residual(p, q_judge)
        for token, share in choices:
            reach = chance * share
            keep = float(keep_chance(p, q_judge, token))
            law[token] += reach * keep
            kept_at[rank] += reach * keep
            if reach * (1 - keep) > NEGLIGIBLE:
                visit(rank + 1, left, without(q_judge, token) if rule.shrink_draft else q_judge,
                      without(q_draw, token), reach * (1 - keep))

    visit(0, p0, q0, q0, 1.0)
    return TreeLaw(law, tuple(kept_at), 0.5 * float((law - p0).abs().sum()))


@dataclass(frozen=True)
class TreeRuleResult:
    rule: str
    title: str
    lossless: bool
    draws: str  # how the candidates are chosen
    test: str  # what each faces
    samples: int
    acceptance: float  # sampled: one of the candidates kept
    acceptance_exact: float
    kept_at_exact: tuple[float, ...]  # per rank
    tv: float  # sampled tokens against the target's first half
    tv_exact: float
    tv_noise_floor: float
    tv_noise_band: float
    chi2_p: float


def sample_rule(pair: Coarse, rule: TreeRule, width: int, samples: int,
                generator: torch.Generator) -> tuple[Counter, int]:
    """`samples` tokens emitted by `rule` with `width` candidates -> (their counts, how many kept one)."""
    counts, kept = Counter(), 0
    p, q = pair.target_probs, pair.draft_probs
    for _ in range(samples):
        verdict = rule.accept(rule.draw(q, width, generator), q, p, generator)
        counts[verdict.token] += 1
        kept += verdict.kept is not None
    return counts, kept


def tree_trial(target_probs: torch.Tensor, draft_probs: torch.Tensor, width: int, samples: int,
               seed: int = 0, names: tuple[str, ...] = tuple(TREE_RULES)) -> tuple[Coarse, dict, list]:
    """Each rule named at one position: its exact law and `samples` sampled tokens, against 2 × samples
    of the target alone (two halves: the noise band). -> (the pair enumerated, {name: TreeLaw}, rows)."""
    pair = coarse(target_probs, draft_probs)
    generator = torch.Generator().manual_seed(seed)
    target = torch.multinomial(pair.target_probs, 2 * samples, replacement=True, generator=generator).tolist()
    half_a, half_b = Counter(target[:samples]), Counter(target[samples:])
    floor, band = tv_noise_floor(half_a, half_b), tv_noise_band(half_a, half_b)
    laws, rows = {}, []
    for name in names:
        rule = TREE_RULES[name]
        laws[name] = law = exact_tree_law(pair.target_probs, pair.draft_probs, rule, width)
        counts, kept = sample_rule(pair, rule, width, samples, generator)
        rows.append(TreeRuleResult(
            name, rule.title, rule.lossless, rule.draw_words, rule.test_words, samples, kept / samples,
            law.acceptance, law.kept_at, tv_distance(counts, half_a), law.tv, floor, band,
            chi_square_two_sample(counts, half_a).p_value,
        ))
    return pair, laws, rows


def single_acceptance(pair: Coarse) -> float:
    """One draft's acceptance at the same position: Σ min(p, q)."""
    return float(torch.minimum(pair.target_probs, pair.draft_probs).sum())


def law_rows(pair: Coarse, laws: dict[str, TreeLaw], token_text) -> list[dict]:
    """One row per token enumerated: its text, p and each rule's exact probability (a chart's rows)."""
    texts = [token_text(i) for i in pair.ids] + ([REST] if pair.has_rest else [])
    return [{"token": text, "p": float(pair.target_probs[i]),
             **{name: float(law.law[i]) for name, law in laws.items()}}
            for i, text in enumerate(texts)]


def trial_at(pair, context: list[int], settings, width: int, samples: int, lock=None) -> dict:
    """The four rules at the trial's position of the real pair (measure.exact.positions: p and q where
    a round's first draft would go), as plain data for a page: rows (TreeRuleResult as dicts), the
    chart's law rows, one draft's acceptance there, and why nothing was judged (greedy, no draft)."""
    at = next(positions(pair, context, settings, 1, lock))
    found = {"greedy": at.greedy, "drafts": at.drafts, "rows": [], "laws": [], "single": 0.0, "rest": False}
    if at.greedy or not at.drafts:
        return found
    coarsened, laws, rows = tree_trial(at.target_probs, at.draft_probs, width, samples, settings.seed)
    found.update(rows=[asdict(row) for row in rows], laws=law_rows(coarsened, laws, pair.token_text),
                 single=single_acceptance(coarsened), rest=coarsened.has_rest)
    return found
