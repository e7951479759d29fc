"""Student mode on a tree round (views.quiz): which of the first position's candidates survives,
judged from the round's own coins and keep chances."""

from specdec.core.records import RoundTrace, SiblingRecord, TreeRecord
from specdec.views.quiz import BRANCH, NONE_SURVIVES, branch_options, judge_branch


def _trace(record: SiblingRecord, path: list[int]) -> RoundTrace:
    tree = TreeRecord(tokens=[10, 11, 12, 13, 14], parents=[-1, 0, 0, 0, 1], path=path, siblings=[record],
                      bonus=False)
    return RoundTrace(index=3, context_length=5, drafted_tokens=[11], positions=[], draft_token_probs=[0.4],
                      target_token_probs=[0.1], accept_probs=[0.25], uniforms=[0.6], num_accepted=len(path),
                      next_token=12, is_bonus=False, emitted_tokens=[12], draft_seconds=0.0,
                      verify_seconds=0.0, tree=tree)


SECOND_KEPT = SiblingRecord(node=0, candidates=[1, 2, 3], tokens=[11, 12], keep_chances=[0.25, 0.8],
                            uniforms=[0.6, 0.3], kept=2, token=12)
NONE_KEPT = SiblingRecord(node=0, candidates=[1, 2, 3], tokens=[11, 12, 13], keep_chances=[0.1, 0.2, 0.5],
                          uniforms=[0.5, 0.9, 0.7], kept=None, token=14)


def test_the_options_are_the_roots_children_then_none():
    assert branch_options(_trace(SECOND_KEPT, [2])) == [1, 2, 3, NONE_SURVIVES]


def test_the_right_branch_is_marked_right_with_each_candidates_reason():
    trace = _trace(SECOND_KEPT, [2])
    answer = judge_branch(trace, 2)
    assert answer.question == BRANCH and answer.right and answer.round_index == 3
    first, second, third = answer.marks
    assert not first.kept and second.kept and not third.kept
    assert first.reason == "rejected: its coin u=0.60 ≥ its keep chance 0.25"
    assert second.reason.startswith("kept: its coin u=0.30 < its keep chance 0.80, against the residual")
    assert third.reason.startswith("never tested")
    # chance to be the one kept: 0.25, then 0.75 × 0.8, and 0 for the candidate not reached
    assert [round(m.survival_probability, 3) for m in answer.marks] == [0.25, 0.6, 0.0]
    assert not judge_branch(trace, 1).right and not judge_branch(trace, NONE_SURVIVES).right


def test_none_survives_is_right_when_every_candidate_is_rejected():
    trace = _trace(NONE_KEPT, [])
    assert judge_branch(trace, NONE_SURVIVES).right
    assert not judge_branch(trace, 3).right
    assert judge_branch(trace, NONE_SURVIVES).kept_count == 0
