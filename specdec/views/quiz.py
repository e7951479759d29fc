"""Predict, then reveal: a student's answer about one round, judged from the round's own numbers.

Two questions about a round, asked before its acceptance test is shown:
    TICK   which drafts will the target keep?        (one yes/no per drafted token)
    COUNT  how many drafts will survive?              (0..k)
The judge compares the answer with what happened and gives each draft a one-line reason. The score
keeps every answer of a browser session, and its calibration: the student's "kept" against the true
probability that the draft survives, Π_{j ≤ i} min(1, p_j/q_j) (a draft survives only if every draft
before it does). At temperature 0 that probability is 1 or 0: kept exactly when it is p's argmax.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specdec.core.records import RoundTrace

TICK, COUNT = "tick", "count"
BRANCH = "branch"  # a tree round's question, whatever the setting: which of the first candidates survives
NONE_SURVIVES = -1  # the answer "every candidate at the first position is rejected"


@dataclass(frozen=True)
class DraftMark:
    position: int  # 0-based drafted position
    kept: bool  # what happened
    predicted_kept: bool | None  # what the student said (TICK), or None (COUNT)
    survival_probability: float  # P(kept) before any coin: Π_{j <= i} min(1, p_j/q_j)
    reason: str  # one line, from the round's numbers

    @property
    def right(self) -> bool | None:
        return None if self.predicted_kept is None else self.predicted_kept == self.kept


@dataclass(frozen=True)
class Answer:
    round_index: int
    question: str  # TICK or COUNT
    marks: list[DraftMark]
    predicted_count: int | None  # COUNT's answer
    kept_count: int

    @property
    def drafts_right(self) -> int:
        if self.question == COUNT:
            return 0
        return sum(mark.right for mark in self.marks)

    @property
    def right(self) -> bool:
        if self.question == COUNT:
            return self.predicted_count == self.kept_count
        return all(mark.right for mark in self.marks)

    @property
    def expected_count(self) -> float:
        """How many drafts survive on average, before any coin: Σ of the survival probabilities."""
        return sum(mark.survival_probability for mark in self.marks)


def survival_probabilities(trace: RoundTrace) -> list[float]:
    """P(draft i is kept) = Π_{j <= i} min(1, p_j/q_j); at temperature 0 each factor is 1 or 0."""
    probabilities, running = [], 1.0
    for accept in trace.accept_probs[: trace.num_drafted]:
        running *= accept
        probabilities.append(running)
    return probabilities


def reason(trace: RoundTrace, i: int, target_top: str | None = None) -> str:
    """Why draft i was kept or not, in the round's own numbers."""
    if i >= trace.num_tested:
        return f"never tested: draft {trace.num_accepted + 1} was rejected first, so this one was discarded"
    kept = i < trace.num_accepted
    q, p, ratio = trace.draft_token_probs[i], trace.target_token_probs[i], trace.accept_probs[i]
    if trace.thresholds is not None:  # typical acceptance: a bar, no coin
        bar = trace.thresholds[i]
        return (f"kept: p(x)={p:.2f} is above the bar {bar:.2f}" if kept
                else f"rejected: p(x)={p:.2f} is not above the bar {bar:.2f}")
    if trace.target_draws is not None:  # sample and compare: the target's own draw y
        return (f"kept: the target drew this very token (chance p(x)={p:.2f})" if kept
                else f"rejected: the target drew another token (x had chance p(x)={p:.2f})")
    if trace.uniforms is None:  # greedy, or the top-choice rule: the argmax test
        if kept:
            return "kept: it is the target's most likely token (argmax of p)"
        top = f" ({target_top})" if target_top else ""
        return f"rejected: the target's most likely token{top} is another one"
    u = trace.uniforms[i]
    if kept and p >= q:
        return f"kept once reached: p(x)={p:.2f} ≥ q(x)={q:.2f}, so its test always passes"
    if kept:
        return (f"a coin flip: kept with probability {ratio:.2f}, and this time it was (the uniform draw "
                f"u={u:.2f} < {ratio:.2f})")
    if p == 0:
        return "rejected: p(x)=0, the target never writes this token here"
    return (f"rejected: the uniform draw u={u:.2f} ≥ p/q={ratio:.2f} (kept with probability {ratio:.2f}, "
            "not this time)")


def judge(
    trace: RoundTrace,
    predicted_kept: list[bool] | None = None,
    predicted_count: int | None = None,
    target_top: list[str] | None = None,
) -> Answer:
    """The student's answer (TICK: `predicted_kept`, one per draft; COUNT: `predicted_count`)
    against the round. `target_top[i]` names p's argmax at draft i, for the greedy reasons."""
    question = TICK if predicted_kept is not None else COUNT
    if question == TICK and len(predicted_kept) != trace.num_drafted:
        raise ValueError(f"one answer per draft: {trace.num_drafted} expected, {len(predicted_kept)} given")
    survival = survival_probabilities(trace)
    marks = [
        DraftMark(
            position=i,
            kept=i < trace.num_accepted,
            predicted_kept=predicted_kept[i] if question == TICK else None,
            survival_probability=survival[i],
            reason=reason(trace, i, target_top[i] if target_top else None),
        )
        for i in range(trace.num_drafted)
    ]
    return Answer(trace.index, question, marks, predicted_count, trace.num_accepted)


@dataclass
class Score:
    """Every answer of one browser session (across runs), and how well calibrated the guesses are."""

    answers: list[Answer] = field(default_factory=list)

    def add(self, answer: Answer) -> None:
        self.answers.append(answer)

    @property
    def rounds_answered(self) -> int:
        return len(self.answers)

    @property
    def rounds_right(self) -> int:
        return sum(answer.right for answer in self.answers)

    @property
    def drafts_judged(self) -> int:
        return sum(len(a.marks) for a in self.answers if a.question == TICK)

    @property
    def drafts_right(self) -> int:
        return sum(a.drafts_right for a in self.answers if a.question == TICK)

    def calibration(self, bins: int = 5) -> list[dict]:
        """TICK answers binned by the true survival probability: per bin, the mean true probability
        and the share the student said "kept". A calibrated student lies on the diagonal."""
        by_bin: list[list[DraftMark]] = [[] for _ in range(bins)]
        for answer in self.answers:
            if answer.question == TICK:
                for mark in answer.marks:  # [b/bins, (b+1)/bins); a probability of 1 joins the last bin
                    by_bin[min(int(mark.survival_probability * bins), bins - 1)].append(mark)
        rows = []
        for inside in by_bin:
            if inside:
                rows.append({
                    "true_probability": sum(m.survival_probability for m in inside) / len(inside),
                    "said_kept": sum(bool(m.predicted_kept) for m in inside) / len(inside),
                    "drafts": len(inside),
                })
        return rows

    def count_guesses(self) -> list[dict]:
        """COUNT answers: the expected number of survivors against the student's number."""
        return [{"expected": a.expected_count, "said": a.predicted_count, "kept": a.kept_count}
                for a in self.answers if a.question == COUNT]


# -- a tree round: which branch survives ------------------------------------------------------------


def branch_options(trace: RoundTrace) -> list[int]:
    """The root's children (tree nodes, in the order they are tested), then NONE_SURVIVES."""
    parents = trace.tree.parents
    return [node for node in range(1, len(parents)) if parents[node] == 0] + [NONE_SURVIVES]


def branch_reason(record, rank: int) -> str:
    """Why the root's child of this rank was kept, rejected or never tested, in the round's numbers."""
    if rank >= len(record.tokens):
        return "never tested: a candidate before it was kept"
    kept = record.kept is not None and rank == len(record.tokens) - 1
    chance, u = record.keep_chances[rank], record.uniforms[rank]
    if u is None:  # temperature 0: the target's top token or not
        return ("kept: it is the target's most likely token" if kept
                else "rejected: not the target's most likely token")
    shrunk = "" if rank == 0 else ", against the residual p and q without the candidates before it"
    if kept:
        return f"kept: its coin u={u:.2f} < its keep chance {chance:.2f}{shrunk}"
    return f"rejected: its coin u={u:.2f} ≥ its keep chance {chance:.2f}{shrunk}"


def judge_branch(trace: RoundTrace, picked: int) -> Answer:
    """A tree round: the student picked the root's child that survives (or NONE_SURVIVES). Each child's
    mark says whether it survived and why; its survival chance is Π (1 − earlier keep chances) × its own,
    for the children tested (0 for the rest: not reached this time)."""
    tree = trace.tree
    record = tree.siblings[0]
    survivor = tree.path[0] if tree.path else NONE_SURVIVES
    marks, running = [], 1.0
    for rank, node in enumerate(branch_options(trace)[:-1]):
        tested = rank < len(record.tokens)
        chance = running * record.keep_chances[rank] if tested else 0.0
        if tested:
            running *= 1 - record.keep_chances[rank]
        marks.append(DraftMark(rank, node == survivor, node == picked, chance, branch_reason(record, rank)))
    return Answer(trace.index, BRANCH, marks, None, int(survivor != NONE_SURVIVES))
