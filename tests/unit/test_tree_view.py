"""A tree round as the round view draws it (views.tree_view, charts.trees), on a hand-built tree:
each node's verdict, the drawing's places, the attention mask, the sibling test beat by beat."""

import json

from specdec.core.records import SiblingRecord, TreeRecord
from specdec.views import charts, tree_view
from specdec.views.tree_view import AFTER, COIN, KEPT, OUTCOME, PQ, REJECTED, ROOT, UNTESTED

LABELS = {10: "the", 11: "cat", 12: "dog", 13: "<b>sat</b>", 14: "ran", 15: "on", 16: "up", 17: "mat"}

# root 0 ─┬─ 1 cat ─┬─ 4 sat ── 6 on
#         │         └─ 5 ran
#         ├─ 2 dog
#         └─ 3 sat
# At the root, cat is rejected and dog kept; dog is a leaf: the bonus comes from p after it.
# Below a second tree ends in a rejection with a draw from the last residual.
ROOT_TEST = SiblingRecord(
    node=0, candidates=[1, 2, 3], tokens=[11, 12], keep_chances=[0.25, 0.8], uniforms=[0.6, 0.3], kept=2,
    token=12, target_probs=[[(12, 0.5), (11, 0.1), (15, 0.4)], [(12, 0.7), (15, 0.3)]],
    draft_probs=[[(11, 0.4), (12, 0.35), (13, 0.25)], [(12, 0.58), (13, 0.42)]],
)
TREE = TreeRecord(tokens=[10, 11, 12, 13, 13, 14, 15], parents=[-1, 0, 0, 0, 1, 1, 4], path=[2],
                  siblings=[ROOT_TEST], bonus=True)
ALL_REJECTED = SiblingRecord(
    node=0, candidates=[1, 2], tokens=[11, 12], keep_chances=[0.1, 0.2], uniforms=[0.5, 0.9], kept=None,
    token=17, target_probs=[[(17, 0.6), (11, 0.4)], [(17, 0.9), (12, 0.1)]],
    draft_probs=[[(11, 0.5), (12, 0.5)], [(12, 1.0)]], residual=[(17, 1.0)],
)


def test_each_node_is_kept_rejected_or_never_tested():
    assert tree_view.node_status(TREE) == [ROOT, REJECTED, KEPT, UNTESTED, UNTESTED, UNTESTED, UNTESTED]


def test_the_layout_puts_depth_across_and_each_parent_beside_its_children():
    places = tree_view.layout(TREE.parents)
    assert [x for x, _ in places] == [0, 1, 1, 1, 2, 2, 3]
    rows = [y for _, y in places]
    assert rows[1] == (rows[4] + rows[5]) / 2 and rows[6] == rows[4]
    assert len({rows[4], rows[5], rows[2], rows[3]}) == 4  # leaves one row apart


def test_the_mask_lets_each_node_see_itself_and_its_ancestors_only():
    mask = tree_view.attention_mask(TREE.parents)
    assert [j for j, seen in enumerate(mask[6]) if seen] == [0, 1, 4, 6]
    assert [j for j, seen in enumerate(mask[2]) if seen] == [0, 2]
    assert not mask[4][5] and not mask[5][4]  # siblings never see each other


def test_the_sibling_test_steps_through_p_and_q_the_coin_and_the_shrunken_q():
    steps = tree_view.sibling_steps(ROOT_TEST)
    assert [(s.child, s.phase) for s in steps] == [(0, PQ), (0, COIN), (0, AFTER), (1, PQ), (1, COIN),
                                                   (1, OUTCOME)]
    after = steps[2]
    assert after.target_probs == ROOT_TEST.target_probs[1]  # the residual the next child faces
    # q without cat, renormalised: 0.35 / 0.6 and 0.25 / 0.6
    assert [(t, round(p, 4)) for t, p in after.draft_probs] == [(12, 0.5833), (13, 0.4167)]
    assert steps[1].kept is False and steps[4].kept is True and steps[-1].token == 12
    rejected = tree_view.sibling_steps(ALL_REJECTED)
    assert rejected[-1].phase == OUTCOME and not rejected[-1].kept
    assert rejected[-1].target_probs == [(17, 1.0)] and rejected[-2].draft_probs is None  # nothing left


def _names(fig) -> list[str]:
    return [trace.name for trace in fig.data if trace.name]


def test_the_tree_chart_hides_verdicts_until_judged_and_escapes_tokens():
    drafted = charts.tree_chart(TREE, LABELS, "t", judged=False)
    assert set(_names(drafted)) == {"root (last token)", "drafted"}
    judged = charts.tree_chart(TREE, LABELS, "t", judged=True)
    assert {"kept", "rejected", "never tested"} <= set(_names(judged))
    text = json.dumps([list(trace.text or []) for trace in judged.data])
    assert "&lt;b&gt;sat&lt;/b&gt;" in text and "<b>sat" not in text
    numbered = charts.tree_chart(TREE, LABELS, "t", judged=False, numbered=True)
    assert any("6 on" in (trace.text or ()) for trace in numbered.data)


def test_the_mask_chart_fills_exactly_the_ancestors():
    fig = charts.mask_chart(TREE, LABELS, "mask")
    z = fig.data[0].z
    mask = tree_view.attention_mask(TREE.parents)
    assert [list(row) for row in z] == [[int(seen) for seen in row] for row in mask]
    assert list(fig.data[0].y)[6].startswith("6 ")


def test_the_step_chart_draws_each_beat():
    steps = tree_view.sibling_steps(ROOT_TEST)
    pq = charts.step_chart(steps[0], LABELS, "t")
    assert _names(pq) == ["p", "q"]
    coin = charts.step_chart(steps[1], LABELS, "t")
    assert [shape.y0 for shape in coin.layout.shapes] == [0.25, 0.6]  # keep chance, then u
    after = charts.step_chart(steps[2], LABELS, "t")
    assert _names(after) == ["residual p (after the rejection)", "q without the rejected x"]
    outcome = charts.step_chart(tree_view.sibling_steps(ALL_REJECTED)[-1], LABELS, "t")
    assert _names(outcome) == ["last residual (drawn from)"]


def test_the_acceptance_chart_stacks_ranks_against_one_draft():
    rows = [{"rule": "without-replacement", "title": "w/o", "kept_at_exact": (0.4, 0.2, 0.1)},
            {"rule": "q-kept", "title": "<lossy>", "kept_at_exact": (0.4, 0.25, 0.15)}]
    fig = charts.tree_acceptance_chart(rows, 0.4, "t")
    assert [list(bar.y) for bar in fig.data[:3]] == [[0.4, 0.4], [0.2, 0.25], [0.1, 0.15]]
    assert list(fig.data[0].x) == ["w/o", "&lt;lossy&gt;"]
    assert list(fig.data[3].y) == [0.4, 0.4] and fig.data[3].name == "one draft: Σ min(p, q) = 0.40"
