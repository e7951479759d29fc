"""The KV caches of one round, as rows of cells to draw: step 4 of every round (the roll-back), made visible.

One row per model, one cell per position this round added to its cache, after a block standing for
what it held before. The lengths come from the trace's CacheLengths, which the round loop read from
the cache objects themselves; nothing here is recomputed from the rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from specdec.core.records import DRAFTED_BY_LOOKUP, RoundTrace

READ = "read"  # a token of the text the model had not seen yet (fed this round)
DRAFT = "draft"  # a drafted token: fed by the draft to draft the next one; scored by the target
NOT_FED = "not fed"  # the draft's last proposal: nothing is drafted after it, so it is never fed
OTHER_BRANCH = "other branch"  # a tree's node off the accepted path, scored by the target (core.tree_rounds)


@dataclass(frozen=True)
class CacheCell:
    position: int  # 0-based position in the sequence
    kind: str  # READ, DRAFT, NOT_FED or OTHER_BRANCH
    token: int | None  # the drafted token at this position, where it is one
    dropped: bool  # removed by the roll-back (shown greyed)


@dataclass(frozen=True)
class CacheRow:
    model: str  # "target" or "draft"
    held_before: int  # positions cached before the round (drawn as one block)
    cells: list[CacheCell]
    lengths: tuple[int, ...]  # the cache's length at each step shown: before, after its pass, kept

    @property
    def kept(self) -> int:
        return self.held_before + sum(cell.kind != NOT_FED and not cell.dropped for cell in self.cells)


def _cells(trace: RoundTrace, start: int, stop: int, kept: int | None, *, draft_row: bool) -> list[CacheCell]:
    """Cells for cache slots start..stop-1 (and the draft's unfed last proposal); `kept`: None before
    the roll-back, else the length it kept."""
    context, drafted = trace.context_length, trace.drafted_tokens
    cells = []
    for slot in range(start, stop):
        is_draft = slot >= context
        token = drafted[slot - context] if is_draft else None
        dropped = kept is not None and slot >= kept
        cells.append(CacheCell(slot, DRAFT if is_draft else READ, token, dropped))
    last = context + len(drafted) - 1
    # x_k is usually proposed, never fed (it stays in the text if every draft passed). An adaptive
    # stop fed it: the draft computed its q for the next token, then chose not to propose one.
    # A copied round (n-gram lookup) never asked the model: nothing of it is in the model's cache.
    if draft_row and drafted and stop <= last and trace.drafted_by != DRAFTED_BY_LOOKUP:
        rejected = last >= context + trace.num_accepted
        cells.append(CacheCell(last, NOT_FED, drafted[-1], kept is not None and rejected))
    return cells


def _tree_cells(trace: RoundTrace, start: int, stop: int, kept: int | None, *,
                draft_row: bool) -> list[CacheCell]:
    """A tree round's cells (core.tree_rounds): the target cached the root at `start` and node i at
    start + i, and keeps the root and the accepted path; the draft cached the nodes it fed (which ones
    the trace does not say, so their tokens are left out) and keeps those on the path, first."""
    tree = trace.tree
    if draft_row:
        return [CacheCell(slot, DRAFT, None, kept is not None and slot >= kept)
                for slot in range(start, stop)]
    depth = [0] * len(tree.parents)
    for node in range(1, len(tree.parents)):
        depth[node] = depth[tree.parents[node]] + 1
    on_path = {0, *tree.path}
    cells = []
    for slot in range(start, stop):
        node = slot - start
        position = trace.context_length - 1 + depth[node]
        kind = READ if node == 0 else (DRAFT if node in on_path or kept is None else OTHER_BRANCH)
        cells.append(CacheCell(position, kind, tree.tokens[node] if node else None,
                               kept is not None and node not in on_path))
    return cells


def cache_rows(trace: RoundTrace, stage: int) -> list[CacheRow]:
    """The caches as the round's stages leave them: stage 1 the draft's pass, stage 2 the target's,
    from stage 4 the roll-back (what it dropped greyed). Empty when the trace has no cache lengths."""
    caches = trace.caches
    if caches is None:
        return []
    rolled_back = stage >= 4
    cell_maker = _cells if trace.tree is None else _tree_cells
    rows = []
    if caches.draft_before is not None:
        kept = caches.draft_kept if rolled_back else None
        cells = cell_maker(trace, caches.draft_before, caches.draft_drafted, kept, draft_row=True)
        lengths = (caches.draft_before, caches.draft_drafted)
        lengths += (caches.draft_kept,) if rolled_back else ()
        rows.append(CacheRow("draft", caches.draft_before, cells, lengths))
    if stage >= 2:
        kept = caches.target_kept if rolled_back else None
        cells = cell_maker(trace, caches.target_before, caches.target_verified, kept, draft_row=False)
        lengths = (caches.target_before, caches.target_verified)
        lengths += (caches.target_kept,) if rolled_back else ()
        rows.insert(0, CacheRow("target", caches.target_before, cells, lengths))
    return rows
