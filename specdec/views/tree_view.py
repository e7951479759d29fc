"""What the round view shows of a tree round (core.records.TreeRecord), as plain data: each node's
status, where it sits in a drawing, the attention mask of the verification pass, and the sibling-by-
sibling test at a node as a list of steps. No Streamlit, no torch.

Node 0 is the root (the context's last token); node i's parent is parents[i]. A node is kept (on the
accepted path), rejected (tested and not kept) or never tested (below a rejected node, or after the
kept sibling).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a trace's tree, read by its fields
    from specdec.core.records import SiblingRecord, TopTokens, TreeRecord

ROOT, KEPT, REJECTED, UNTESTED = "root", "kept", "rejected", "never tested"


def node_status(tree: TreeRecord) -> list[str]:
    """Per node: ROOT, KEPT, REJECTED or UNTESTED."""
    status = [UNTESTED] * len(tree.tokens)
    status[0] = ROOT
    for record in tree.siblings:
        for child in record.candidates[: len(record.tokens)]:
            status[child] = REJECTED
    for node in tree.path:
        status[node] = KEPT
    return status


def depths(parents: list[int]) -> list[int]:
    depth = [0] * len(parents)
    for node in range(1, len(parents)):
        depth[node] = depth[parents[node]] + 1
    return depth


def children(parents: list[int], node: int) -> list[int]:
    """In the order of their candidates' ranks (parents list them so)."""
    return [child for child in range(1, len(parents)) if parents[child] == node]


def layout(parents: list[int]) -> list[tuple[int, float]]:
    """(column, row) per node: the depth, and the leaves one row apart, top to bottom in rank order,
    each parent level with the middle of its children."""
    rows: dict[int, float] = {}
    next_row = 0.0

    def place(node: int) -> float:
        nonlocal next_row
        below = children(parents, node)
        if not below:
            rows[node], next_row = next_row, next_row + 1
        else:
            placed = [place(child) for child in below]
            rows[node] = (placed[0] + placed[-1]) / 2
        return rows[node]

    place(0)
    depth = depths(parents)
    return [(depth[node], rows[node]) for node in range(len(parents))]


def ancestors(parents: list[int], node: int) -> list[int]:
    """The node itself and every node above it, up to the root."""
    line = [node]
    while parents[line[-1]] >= 0:
        line.append(parents[line[-1]])
    return line


def attention_mask(parents: list[int]) -> list[list[bool]]:
    """mask[i][j]: in the verification pass, node i attends to node j (j is i or one of its ancestors).
    Every node also sees the whole context, which the mask leaves out."""
    seen = [set(ancestors(parents, node)) for node in range(len(parents))]
    return [[j in seen[i] for j in range(len(parents))] for i in range(len(parents))]


def tested_positions(tree: TreeRecord) -> list[SiblingRecord]:
    """The nodes whose children were judged, root first: one per position of the accepted path."""
    return list(tree.siblings)


# -- the sibling-by-sibling test at one node ----------------------------------------------------------

PQ, COIN, AFTER, OUTCOME = "p and q", "the coin", "residual and shrunken q", "outcome"


@dataclass(frozen=True)
class SiblingStep:
    """One beat of the test at a node: which child, which phase, and the distributions to draw."""

    child: int  # the rank of the child tested (0-based)
    phase: str  # PQ, COIN, AFTER or OUTCOME
    token: int | None  # the candidate tested (OUTCOME: the token the node emits)
    target_probs: TopTokens | None  # what p is at this beat: p_i, or the residual after a rejection
    draft_probs: TopTokens | None  # q_i, or q_i without x_i after a rejection; None at T = 0
    keep_chance: float | None
    uniform: float | None
    kept: bool | None  # the verdict, from the COIN beat on


def without(draft_probs: TopTokens | None, token: int) -> TopTokens | None:
    """q without `token`, renormalised: q(y) / (1 − q(x)) for every other y (exact for the tokens
    shown, whatever the tokens not shown hold). None where q was all on x: no candidate is left."""
    if draft_probs is None:
        return None
    mass = 1 - sum(prob for tok, prob in draft_probs if tok == token)
    if mass <= 1e-12:
        return None
    return [(tok, prob / mass) for tok, prob in draft_probs if tok != token]


def sibling_steps(record: SiblingRecord) -> list[SiblingStep]:
    """The test at one node beat by beat: for each child tested, p and q, then the coin, then (after a
    rejection) the residual and the shrunken q the next child faces; last, the outcome."""
    steps: list[SiblingStep] = []
    tested = len(record.tokens)
    target = record.target_probs or [None] * tested
    draft = record.draft_probs or [None] * tested
    for rank, token in enumerate(record.tokens):
        kept = record.kept is not None and rank == tested - 1
        common = {"child": rank, "token": token, "keep_chance": record.keep_chances[rank],
                  "uniform": record.uniforms[rank]}
        steps.append(SiblingStep(phase=PQ, target_probs=target[rank], draft_probs=draft[rank], kept=None,
                                 **common))
        steps.append(SiblingStep(phase=COIN, target_probs=target[rank], draft_probs=draft[rank], kept=kept,
                                 **common))
        if not kept:
            after = target[rank + 1] if rank + 1 < tested else record.residual
            steps.append(SiblingStep(phase=AFTER, target_probs=after, draft_probs=without(draft[rank], token),
                                     kept=False, **common))
    last = steps[-1] if steps else None
    steps.append(SiblingStep(
        child=tested - 1 if record.kept is not None else tested, phase=OUTCOME, token=record.token,
        target_probs=record.residual if record.kept is None else (last.target_probs if last else None),
        draft_probs=None, keep_chance=None, uniform=None, kept=record.kept is not None,
    ))
    return steps


def step_name(step: SiblingStep) -> str:
    """A beat's name in a picker: 'x1 · p and q', 'x1 · the coin', ..., 'outcome'."""
    if step.phase == OUTCOME:
        return "outcome"
    return f"x{step.child + 1} · {step.phase}"
