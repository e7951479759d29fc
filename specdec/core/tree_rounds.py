"""Rounds that verify a tree of drafts: several candidates per position, one target pass, at any T.

A round's tree has a fixed shape (`TreeShape`, chosen by core.tree_shape from measured acceptance
and pass costs), or grows to fit the round (`TreeBudget`, Settings.tree = auto: EAGLE-2's dynamic tree).
Node 0 is the root, the context's last token; every other node is a drafted token.

    1. Draft   level by level: at each node that has children, the draft's q there gives candidates
               (drawn without replacement, Gumbel-top-k; at T = 0 q's top tokens), then the new nodes
               that have children of their own go through the draft in one pass (tree attention)
    2. Verify  the root and every node in ONE target pass, each seeing only its ancestors: p at each node
    3. Judge   down from the root: the children of a node are judged in turn (core.tree_rule); the kept
               one becomes the next node; where none is kept the node emits the rule's token and the
               round ends; at a kept leaf the bonus token is drawn from p there (at T = 0 the
               target's top token stands for every draw)
    4. Keep    both KV caches keep the context and the accepted path only

A chain is the tree with one child per node; its round is the chain's round (core.rounds), which the
settings' `tree = off` keeps.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from specdec.clock import now
from specdec.config import Settings
from specdec.core import stopwatch
from specdec.core.cached_model import CachedModel
from specdec.core.drafters import NgramDrafter
from specdec.core.records import (
    STOP_CAP,
    CacheLengths,
    RoundTrace,
    SiblingRecord,
    TreeRecord,
)
from specdec.core.sampling import warp_probs
from specdec.core.tree_rule import TREE_RULES, SiblingVerdict, TreeRule, greedy_siblings, top_of

DRAFT, VERIFY, ACCEPT, ROLLBACK = "draft", "verify", "warp + accept", "roll-back"
SHOWN_TOKENS = 8  # top tokens of p, q and a residual a trace keeps per tested node


@dataclass(frozen=True)
class TreeShape:
    """Where a round's drafts go: `parents[i]` is node i's parent (-1 for the root, node 0). Parents come
    before their children, and a node's children in the order of their candidates' ranks."""

    parents: tuple[int, ...]

    def __len__(self) -> int:
        """Drafted nodes (the root not counted)."""
        return len(self.parents) - 1

    def children(self, node: int) -> list[int]:
        return [child for child, parent in enumerate(self.parents) if parent == node]

    @property
    def depths(self) -> list[int]:
        depth = [0] * len(self.parents)
        for node, parent in enumerate(self.parents[1:], start=1):
            depth[node] = depth[parent] + 1
        return depth

    def cut(self, max_depth: int) -> TreeShape:
        """The shape without its nodes deeper than `max_depth` (the end of a token budget)."""
        keep = [node for node, depth in enumerate(self.depths) if depth <= max_depth]
        index = {node: i for i, node in enumerate(keep)}
        return TreeShape(tuple(index.get(self.parents[node], -1) for node in keep))


def chain_shape(length: int) -> TreeShape:
    """k drafts in a row: node i's parent is node i - 1."""
    return TreeShape(tuple(range(-1, length)))


@dataclass(frozen=True)
class TreeBudget:
    """How a round grows its own tree (Settings.tree = auto): at most `nodes` drafted nodes in `depth`
    levels, at most `width` candidates at a node, each joining where its chance pays for what it adds to
    the round's cost (`grow_tree`)."""

    nodes: int
    depth: int
    pass_costs: tuple[float, ...]  # a target pass over n tokens (index n - 1), in one-token passes
    step_price: float  # a drafting step (one level of the tree), in the same unit
    width: int = 4


# A node must be at least this likely to be kept, even where the pass prices it at nothing (a GPU).
NODE_FLOOR = 0.05


@dataclass(frozen=True)
class DraftedTree:
    """A round's tree as drafted: node tokens (node 0: the root, the context's last token), parents, and
    q at every node that has children (the distribution its candidates were drawn from)."""

    tokens: list[int]
    parents: list[int]
    draft_probs: dict[int, torch.Tensor]  # node -> q (vocab,) on the host
    draft_fed: list[int]  # the nodes the draft model has in its cache after the context, in that order

    def children(self, node: int) -> list[int]:
        return [child for child, parent in enumerate(self.parents) if parent == node]


def copied_tree(token_ids: list[int], copied: list[int], vocab_size: int) -> DraftedTree:
    """Prompt lookup's continuation as a tree of one branch: q is a point mass on each copied token
    (core.drafters.NgramDrafter), so a copy is kept with chance p(x) and the residual is p without x."""
    draft_probs = {}
    for node, token in enumerate(copied):
        draft_probs[node] = torch.zeros(vocab_size)
        draft_probs[node][token] = 1.0
    return DraftedTree([token_ids[-1], *copied], list(range(-1, len(copied))), draft_probs, [])


def root_only(draft: CachedModel, token_ids: list[int], sampling) -> DraftedTree:
    """A tree to grow: the root (the context's last token) and its q, once the draft has read what it
    had not seen of the context."""
    logits = draft.extend(token_ids[draft.cache_length :], keep_last=1)
    return DraftedTree([token_ids[-1]], [-1], {0: warp_probs(logits, sampling)[0].cpu()}, [])


def candidates_at(q: torch.Tensor, count: int, greedy: bool, rule: TreeRule, generator: torch.Generator):
    """A node's `count` candidates from its q: q's top tokens at T = 0, else the rule's draw."""
    return top_of(q, count) if greedy else rule.draw(q, count, generator)


def feed_level(draft: CachedModel, tree: DraftedTree, nodes: list[int], sampling) -> None:
    """Feed `nodes` (one level of the tree) through the draft in one pass after the nodes fed before
    (tree.draft_fed, in the draft's cache in that order), each seeing its ancestors only; their q join
    tree.draft_probs."""
    tree.draft_fed.extend(nodes)
    # The draft's tree so far: each fed node's parent among the fed ones (-1: the root, in the cache).
    fed_at = {node: i for i, node in enumerate(tree.draft_fed)}
    fed_parents = [fed_at.get(tree.parents[node], -1) for node in tree.draft_fed]
    if len(nodes) == 1 and fed_parents[-1] == len(fed_parents) - 2:  # a chain so far: a plain step
        logits = draft.extend([tree.tokens[nodes[0]]])
    else:
        logits = draft.extend_tree([tree.tokens[node] for node in nodes], fed_parents)
    for node, row in zip(nodes, warp_probs(logits, sampling).cpu(), strict=True):
        tree.draft_probs[node] = row


def draft_tree(draft: CachedModel, token_ids: list[int], shape: TreeShape, greedy: bool, rule: TreeRule,
               sampling, generator: torch.Generator) -> DraftedTree:
    """Step 1: grow `shape` with the draft model, one draft pass per level of the tree.

    A node with children gets that many candidates from q at it (fewer where q has fewer tokens; the
    missing children and what hangs below them are dropped). Only nodes with children are fed to the
    draft: a leaf's q is never needed.
    """
    tree = root_only(draft, token_ids, sampling)
    tokens, parents = tree.tokens, tree.parents
    placed = {0: 0}  # shape node -> tree node
    depths = shape.depths
    for depth in range(1, max(depths) + 1):
        level = []
        for parent in (n for n, d in enumerate(depths) if d == depth - 1 and n in placed):
            children = shape.children(parent)
            q = tree.draft_probs.get(placed[parent])
            if not children or q is None:
                continue
            candidates = candidates_at(q, len(children), greedy, rule, generator)
            for child, token in zip(children, candidates, strict=False):
                placed[child] = len(tokens)
                tokens.append(token)
                parents.append(placed[parent])
                level.append(child)
        to_feed = [placed[c] for c in level if shape.children(c)]
        if to_feed:
            feed_level(draft, tree, to_feed, sampling)
    return tree


def grow_tree(draft: CachedModel, token_ids: list[int], budget: TreeBudget, greedy: bool, rule: TreeRule,
              sampling, generator: torch.Generator) -> DraftedTree:
    """Step 1, the tree grown to fit this round: level by level, the candidates likeliest to be kept join
    while their chance pays for them (EAGLE-2 ranks a tree's nodes by the draft's confidence so).

    A node's chance is its parent's times q's mass on its candidate. It joins, likeliest first, where
    it raises the round's tokens per unit of cost: where its chance beats its price times the tokens
    the round expects per unit of cost so far, and never below NODE_FLOOR. Its price is what it adds
    to the round: one more token in the target's pass, and for the first node of a level a drafting
    step. (Cheaper prices, the pass's growth spread to its next step or a chain's threshold without
    the tokens-per-cost factor, grew bigger trees that ran slower here: docs/LOG.md, "Token trees
    raced against the chain".) Whether the j-th candidate at a node joins is decided from q's j-th
    largest probability, before it is drawn: a candidate kept only when the token drawn was likely would
    no longer be a draw from q, and the rule would not be exact.
    """
    tree = root_only(draft, token_ids, sampling)
    tokens, parents, chances = tree.tokens, tree.parents, [1.0]
    costs = budget.pass_costs
    expected, cost = 1.0, costs[0]  # tokens per round and its cost: the pass over the root alone
    frontier = [0]
    for depth in range(1, budget.depth + 1):
        offers = sorted(((chances[node] * float(value), node, rank) for node in frontier
                         for rank, value in enumerate(tree.draft_probs[node].topk(budget.width).values)),
                        key=lambda offer: (-offer[0], offer[1], offer[2]))
        counts: Counter[int] = Counter()
        for chance, node, rank in offers:
            size = len(tokens) + sum(counts.values())  # tokens in the pass before this one joins
            if size > budget.nodes or rank != counts[node]:
                break
            price = costs[size] - costs[size - 1] + (budget.step_price if not counts and depth > 1 else 0.0)
            if chance <= max(NODE_FLOOR, price * expected / cost):
                break
            counts[node] += 1
            expected, cost = expected + chance, cost + price
        level = []
        for node in frontier:
            if not counts[node]:
                continue
            q = tree.draft_probs[node]
            for token in candidates_at(q, counts[node], greedy, rule, generator):
                level.append(len(tokens))
                tokens.append(token)
                parents.append(node)
                chances.append(chances[node] * float(q[token]))
        # Only nodes whose children could still join are fed to the draft for their q.
        frontier = [node for node in level if chances[node] > NODE_FLOOR]
        if not frontier or depth == budget.depth or len(tokens) > budget.nodes:
            break
        feed_level(draft, tree, frontier, sampling)
    return tree


@dataclass(frozen=True)
class TreeVerdict:
    """Step 3's outcome: the accepted path (tree nodes), the emitted tokens, each tested node's verdict."""

    path: list[int]
    emitted: list[int]
    verdicts: list[tuple[int, SiblingVerdict]]  # (node, its children's verdict), root first
    bonus: bool  # the last token came from p at a kept leaf


def judge_tree(tree: DraftedTree, target_probs: torch.Tensor, greedy: bool, rule: TreeRule,
               generator: torch.Generator) -> TreeVerdict:
    """Step 3: judge down the tree from the root. `target_probs` (nodes, vocab): p after each node."""
    node, path, emitted, verdicts = 0, [], [], []
    while True:
        children = tree.children(node)
        if not children:  # a kept leaf (or a root nothing was drafted at): the bonus token
            p = target_probs[node]
            token = int(p.argmax()) if greedy else int(torch.multinomial(p.cpu(), 1, generator=generator))
            return TreeVerdict(path, [*emitted, token], verdicts, True)
        candidates = [tree.tokens[child] for child in children]
        if greedy:
            verdict = greedy_siblings(candidates, target_probs[node])
        else:
            verdict = rule.accept(candidates, tree.draft_probs[node], target_probs[node].cpu(), generator)
        verdicts.append((node, verdict))
        emitted.append(verdict.token)
        if verdict.kept is None:
            return TreeVerdict(path, emitted, verdicts, False)
        node = children[verdict.kept]
        path.append(node)


def _shown(probs: torch.Tensor | None) -> list[tuple[int, float]] | None:
    if probs is None:
        return None
    top = probs.topk(min(SHOWN_TOKENS, probs.shape[-1]))
    return [(int(t), round(float(v), 6)) for v, t in zip(top.values, top.indices, strict=True)]


def tree_record(tree: DraftedTree, verdict: TreeVerdict, detail: bool) -> TreeRecord:
    """The tree as plain data: its nodes, and at each tested node the siblings' tests (p_i and q_i as
    their top tokens in a detailed run, with the keep chance and coin) and the residual, if drawn."""
    siblings = []
    for node, v in verdict.verdicts:
        siblings.append(SiblingRecord(
            node=node,
            candidates=tree.children(node),
            tokens=[t.step.token for t in v.tests],
            keep_chances=[float(t.step.keep_chance) for t in v.tests],
            uniforms=[t.uniform for t in v.tests],
            kept=None if v.kept is None else tree.children(node)[v.kept],
            token=v.token,
            target_probs=[_shown(t.step.target_probs) for t in v.tests] if detail else None,
            draft_probs=[_shown(t.step.draft_probs) for t in v.tests] if detail else None,
            residual=_shown(v.residual) if detail else None,
        ))
    return TreeRecord(tokens=tree.tokens, parents=tree.parents, path=verdict.path, siblings=siblings,
                      bonus=verdict.bonus)


def tree_round_trace(index: int, context_length: int, tree: DraftedTree, verdict: TreeVerdict,
                     emitted: list[int], seconds: tuple[float, float], caches: CacheLengths,
                     detail: bool, rule: str, p: torch.Tensor, greedy: bool) -> RoundTrace:
    """The round as a chain's record reads (the main line: the accepted path, then the first candidate
    tested where the path ended), with the whole tree in `tree`."""
    tested = [next(t for t in v.tests if t.kept) if v.kept is not None else v.tests[0]
              for _, v in verdict.verdicts if v.tests]
    steps = [t.step for t in tested]
    # Per tested node, the chance its first child alone would be kept, from p and q there (a chain's
    # expected acceptance: Σ min(p, q); greedy, whether the two top tokens agree).
    nodes = [node for node, v in verdict.verdicts if v.tests]
    expected = [float((p[n].argmax() == tree.draft_probs[n].argmax()) if greedy else
                      torch.minimum(p[n], tree.draft_probs[n]).sum()) for n in nodes]
    return RoundTrace(
        index=index,
        context_length=context_length,
        drafted_tokens=[s.token for s in steps],
        positions=[],
        draft_token_probs=[0.0 if s.draft_probs is None else float(s.draft_probs[s.token]) for s in steps],
        target_token_probs=[float(s.target_probs[s.token]) for s in steps],
        accept_probs=[float(s.keep_chance) for s in steps],
        uniforms=None if any(t.uniform is None for t in tested) else [t.uniform for t in tested],
        num_accepted=len(verdict.path),
        next_token=verdict.emitted[-1],
        is_bonus=verdict.bonus,
        emitted_tokens=emitted,
        draft_seconds=seconds[0],
        verify_seconds=seconds[1],
        caches=caches,
        draft_cap=len(tree.tokens) - 1,
        draft_stop=STOP_CAP,
        rule=rule,
        expected_accept=expected,
        tree=tree_record(tree, verdict, detail),
    )


def tree_rounds(target: CachedModel, draft: CachedModel, prompt_ids: list[int], settings: Settings,
                shape: TreeShape | TreeBudget, generator: torch.Generator,
                stop_token_ids: Sequence[int] = frozenset(), detail: bool = True,
                lookup: NgramDrafter | None = None) -> Iterator[RoundTrace]:
    """Speculative decoding with a tree of drafts per round, grown by the draft model `draft` (its
    CachedModel) in `shape`, or to fit each round within a `TreeBudget`; one RoundTrace per target pass,
    as core.rounds' chain yields them. With a `lookup`, a round whose text repeats itself copies instead
    (one branch as deep as the tree may go), and the draft model catches up the next time it drafts."""
    sampling, greedy = settings.sampling, settings.sampling.greedy
    rule = TREE_RULES[settings.tree_rule]
    tokens = list(prompt_ids)
    # Invariant at the start of every round, as in the chain's: the target has seen all tokens but the last.
    if target.cache_length < len(tokens) - 1:
        target.extend(tokens[target.cache_length : -1], keep_last=1)
    num_new, index = 0, 0
    while num_new < settings.max_new_tokens:
        # Leave room for the one token the target always adds.
        room = settings.max_new_tokens - num_new - 1
        if isinstance(shape, TreeBudget):
            round_budget = TreeBudget(shape.nodes, min(shape.depth, room), shape.pass_costs, shape.step_price,
                                      shape.width)
            deepest = round_budget.depth
        else:
            round_shape = shape.cut(room)
            deepest = max(round_shape.depths)
        start = now()
        target_before, draft_before = target.cache_length, draft.cache_length
        with stopwatch.stage(DRAFT):
            copied = lookup.continuation(tokens, deepest) if lookup is not None and deepest else []
            if copied:
                tree = copied_tree(tokens, copied, target.vocab_size)
            elif isinstance(shape, TreeBudget):
                tree = grow_tree(draft, tokens, round_budget, greedy, rule, sampling, generator)
            else:
                tree = draft_tree(draft, tokens, round_shape, greedy, rule, sampling, generator)
        draft_drafted, drafted = draft.cache_length, now()

        with stopwatch.stage(VERIFY):
            # One pass: p after every node (a tree of one branch goes as a chain, without a mask).
            is_chain = tree.parents == list(range(-1, len(tree.tokens) - 1))
            logits = target.extend(tree.tokens) if is_chain else target.extend_tree(tree.tokens, tree.parents)
        target_verified = target.cache_length

        with stopwatch.stage(ACCEPT):
            target_probs = warp_probs(logits, sampling)
            verdict = judge_tree(tree, target_probs, greedy, rule, generator)
        verified = now()

        ends = [i for i, token in enumerate(verdict.emitted) if token in stop_token_ids]
        emitted, stopped = verdict.emitted[: ends[0] + 1] if ends else verdict.emitted, bool(ends)
        context_length = len(tokens)
        tokens += emitted
        num_new += len(emitted)

        with stopwatch.stage(ROLLBACK):
            # The target cached the root at target_before and node i at target_before + i.
            target.keep(target_before + 1, [target_before + node for node in verdict.path])
            # The draft cached the nodes it fed, in order, after the context (the root included): it
            # keeps those on the accepted path (the path's first nodes: a node fed has its parent fed).
            context = draft_drafted - len(tree.draft_fed)
            fed_at = {node: context + i for i, node in enumerate(tree.draft_fed)}
            draft.keep(context, [fed_at[node] for node in verdict.path if node in fed_at])
        caches = CacheLengths(target_before, target_verified, target.cache_length,
                              draft_before, draft_drafted, draft.cache_length)
        yield tree_round_trace(index, context_length, tree, verdict, emitted,
                               (drafted - start, verified - drafted), caches,
                               detail, rule.name, target_probs.cpu(), greedy)
        index += 1
        if stopped:
            return

