"""What a round leaves behind: plain records (lists and numbers, no tensors) that the app draws,
the metrics summarise and the CLI writes as JSON. The torch loop that fills them is in rounds.py."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ShownDistribution:
    """A distribution cut down to the tokens worth showing: top tokens of p, q, residual and x."""

    token_ids: list[int]
    target_probs: list[float]  # p at those tokens
    draft_probs: list[float] | None  # q at those tokens (None at position k+1, where nothing was drafted)
    residual_probs: list[float] | None  # norm(max(0, p - q)) there, only at the first rejection


@dataclass(frozen=True)
class CacheLengths:
    """How many tokens each model's KV cache held at each step of a round, read from the caches.

    The target's verification pass caches the accepted drafts for free; the draft never fed its last
    draft (nothing was drafted after it), so after a round where every draft was accepted it re-reads
    that draft, with the bonus token, at the start of the next round.
    """

    target_before: int  # the context but its last token
    target_verified: int  # + the last token and the k drafts (one pass)
    target_kept: int  # after the roll-back: the context and the accepted drafts
    draft_before: int | None  # None: a drafter with no cache (n-gram lookup)
    draft_drafted: int | None  # + what it had not seen, and k - 1 of its drafts
    draft_kept: int | None  # after the roll-back


# Why a round drafted no more tokens than it did (RoundTrace.draft_stop).
STOP_CAP = "cap"  # it drafted as many as this round's cap allowed (γ, or the adaptive cap below γ)
STOP_BUDGET = "budget"  # the token budget had room for fewer
STOP_CONFIDENCE = "confidence"  # adaptive: the chance that every draft survives fell below the threshold
STOP_NO_MATCH = "no match"  # the n-gram lookup found no (longer) continuation

# Who proposed a round's drafts (RoundTrace.drafted_by).
DRAFTED_BY_MODEL = "model"  # a draft model, token by token
DRAFTED_BY_LOOKUP = "lookup"  # copied from earlier in the text (n-gram lookup)
DRAFTED_BY_HEAD = "feature head"  # a feature head reading the target's last hidden state (EAGLE)


@dataclass(frozen=True)
class HeadRead:
    """What a feature head read to make a round's first draft (core.feature_head)."""

    position: int  # the last verified position: its token's index in the sequence
    next_token: int  # the token after it (the one the target chose last), whose embedding it read too
    feature: list[float] | None  # the target's last hidden state there; None in a lean run


TopTokens = list[tuple[int, float]]  # (token id, probability), likeliest first


@dataclass(frozen=True)
class SiblingRecord:
    """The children of one tree node judged in turn (core.tree_rule): a round's tested node."""

    node: int  # the tree node whose children were judged (0: the root)
    candidates: list[int]  # its children, as tree nodes, in the order they are judged
    tokens: list[int]  # the children tested, up to the kept one: their tokens
    keep_chances: list[float]  # min(1, p_i(x_i)/q_i(x_i)); greedy: 1 for the target's top token, else 0
    uniforms: list[float | None]  # the coin each faced (None: greedy, no coin)
    kept: int | None  # the kept child, as a tree node; None: every one rejected
    token: int  # what the node emits: the kept child's token, or a draw from the residual
    # In a detailed run, per tested child: p_i and q_i as their top tokens (p_i is the residual the
    # earlier rejections left, q_i the draft with the earlier children removed)
    target_probs: list[TopTokens] | None = None
    draft_probs: list[TopTokens | None] | None = None
    residual: TopTokens | None = None  # every child rejected: the last residual, the token drawn from it


@dataclass(frozen=True)
class TreeRecord:
    """A round's tree of drafts: node 0 is the root (the context's last token), node i's parent
    parents[i]; the accepted path; the verdict at each node tested, root first."""

    tokens: list[int]
    parents: list[int]
    path: list[int]  # the accepted nodes, root's child first
    siblings: list[SiblingRecord]
    bonus: bool  # the last token came from p at a kept leaf (no node to judge below it)


@dataclass(frozen=True)
class RoundTrace:
    """One round: k drafts, one target pass, the verdict, the tokens it emitted."""

    index: int
    context_length: int  # tokens in the sequence before this round
    drafted_tokens: list[int]
    # k + 1 entries: one per drafted token, plus the bonus slot; empty in a lean run (nobody shows it)
    positions: list[ShownDistribution]
    draft_token_probs: list[float]  # q_i(x_i)
    target_token_probs: list[float]  # p_i(x_i)
    accept_probs: list[float]  # min(1, p/q); greedy: 1 if x_i is the target's argmax, else 0
    uniforms: list[float] | None  # the coin flips; None in greedy mode
    num_accepted: int
    next_token: int  # resampled from the residual, or the bonus from p_{k+1}
    is_bonus: bool
    # accepted drafts + next_token, cut after an end-of-sequence token
    emitted_tokens: list[int]
    draft_seconds: float
    verify_seconds: float  # the target's forward pass over k + 1 positions
    caches: CacheLengths | None = None  # the KV caches' lengths during the round
    draft_cap: int = 0  # the most this round could draft: γ, or the adaptive cap
    draft_stop: str = STOP_CAP  # why drafting stopped where it did (the STOP_ names above)
    # Adaptive stop: the product of the draft's top probabilities, including the token not proposed.
    stop_confidence: float | None = None
    stop_threshold: float | None = None  # with STOP_CONFIDENCE: the threshold it fell below (stop_thresholds)
    drafted_by: str = DRAFTED_BY_MODEL  # one of the DRAFTED_BY_ names above
    head_read: HeadRead | None = None  # with a feature head: what its first draft read
    rule: str = "speculative"  # the acceptance rule that judged the drafts (config.RULE_NAMES)
    target_draws: list[int] | None = None  # sample-and-compare: y_i ~ p_i, compared with each draft
    thresholds: list[float] | None = None  # typical acceptance: keep x_i if p_i(x_i) is above this
    # Per drafted position: the chance the rule keeps the draft, from p and q before x is drawn
    # (Σ min(p, q) for speculative sampling; core.acceptance.Rule.expected)
    expected_accept: list[float] | None = None
    # A tree round (core.tree_rounds): the whole tree. The fields above then read its main line: the
    # accepted path, then the first child tested where the path ended.
    tree: TreeRecord | None = None

    @property
    def num_drafted(self) -> int:
        """k: the tokens drafted this round (at most γ, the settings' cap; an n-gram miss drafts 0)."""
        return len(self.drafted_tokens)

    @property
    def num_tested(self) -> int:
        """Drafted positions that faced the test: up to and including the first rejection."""
        return min(self.num_accepted + 1, self.num_drafted)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TargetStep:
    """One step of plain decoding: one target pass, one token."""

    index: int
    token: int
    seconds: float
