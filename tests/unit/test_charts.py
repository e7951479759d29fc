"""Chart builders on hand-built traces: no model, no Streamlit."""


from hand_traces import LABELS, position, trace

from specdec.core.records import ShownDistribution
from specdec.views import charts


def test_draft_chart_highlights_the_drafted_token_and_escapes_labels():
    fig = charts.draft_chart(position(), drafted=3, labels=LABELS, title="q at <b>1</b>")
    bar = fig.data[0]
    assert list(bar.y) == sorted(bar.y, reverse=True)
    assert "&lt;b&gt;bold&lt;/b&gt;" in bar.x and "<b>bold</b>" not in bar.x
    colors = dict(zip(bar.x, bar.marker.color, strict=True))
    assert colors["&lt;b&gt;bold&lt;/b&gt;"] == charts.Q_COLOR
    assert sum(c == charts.Q_COLOR for c in bar.marker.color) == 1
    assert "<b>" not in fig.layout.title.text


def test_distribution_chart_shows_p_q_and_residual_only_where_given():
    plain = charts.distribution_chart(position(), LABELS, "t", highlight=2, show_residual=True)
    assert [d.name for d in plain.data] == ["p (target)", "q (draft)"]
    widths = list(plain.data[0].marker.line.width)
    assert widths[1] == 3 and sum(widths) == 3  # only token 2 (second by p) is outlined
    full = charts.distribution_chart(position(residual=True), LABELS, "t", highlight=1)
    assert len(full.data) == 3 and full.data[2].name.startswith("residual")
    assert list(full.data[2].y) == [0.8, 0.0, 0.0, 0.2]
    hidden = charts.distribution_chart(position(residual=True), LABELS, "t", show_residual=False)
    assert len(hidden.data) == 2
    bonus = charts.distribution_chart(position(draft=False), LABELS, "t")
    assert [d.name for d in bonus.data] == ["p (target)"]


def test_distribution_chart_keeps_a_highlighted_token_beyond_the_top():
    many = ShownDistribution(list(range(20)), [1 / 20] * 20, None, None)
    fig = charts.distribution_chart(many, {}, "t", highlight=19)
    assert len(fig.data[0].x) == charts.MAX_BARS and "&lt;id 19&gt;" in fig.data[0].x


def test_acceptance_chart_marks_u_for_tested_positions_only():
    fig = charts.acceptance_chart(trace(), LABELS)
    u = [d for d in fig.data if d.name and d.name.startswith("u ")]
    assert len(u) == 1 and list(u[0].x) == [0.05, 0.9]  # 2 tested: one accepted, one rejected
    assert list(u[0].marker.color) == [charts.ACCEPT_COLOR, charts.REJECT_COLOR]
    assert u[0].cliponaxis is False  # the first row's "u=…" sits above the plot area: drawn, not cut
    zones = [d for d in fig.data if d.type == "bar" and d.opacity == 0.35]
    assert [z.marker.color for z in zones] == [charts.ACCEPT_COLOR, charts.ACCEPT_COLOR, charts.MUTED_COLOR]
    assert [list(z.x) for z in zones] == [[1.0], [0.5], [0.75]]  # the accept zone ends at min(1, p/q)
    assert "u &lt; min(1, p/q)" in fig.layout.title.text  # escaped; Plotly shows "<"


def test_acceptance_chart_greedy_has_no_coin():
    fig = charts.acceptance_chart(trace(uniforms=None), LABELS)
    assert not [d for d in fig.data if d.name and d.name.startswith("u ")]
    assert "greedy" in fig.layout.title.text
    assert any(d.name == "1 if x = argmax p, else 0" for d in fig.data)


def test_duplicate_labels_stay_distinct():
    fig = charts.draft_chart(position(), 1, {1: "x", 2: "x", 3: "x", 4: "y"}, "t")
    assert len(set(fig.data[0].x)) == len(fig.data[0].x)


def test_timeline_gives_each_draft_its_fate_and_each_round_its_added_token():
    rejected = trace(num_accepted=1)  # draft 1 kept, draft 2 rejected, draft 3 never tested
    bonus = trace(uniforms=(0.0, 0.0, 0.0), num_accepted=3, is_bonus=True)
    rows = charts.timeline_rows([rejected, bonus], LABELS)
    fates = [(r["slot"], r["fate"]) for r in rows[:4]]
    assert fates == [(1, "accepted"), (2, "rejected"), (3, "not tested"), (4, "resampled")]
    assert [r["fate"] for r in rows[4:]] == ["accepted"] * 3 + ["bonus"]
    assert rows[2]["token"] == LABELS[3]  # raw text: Vega tooltips show it as text, not HTML
    figure = charts.timeline_chart([rejected, bonus], LABELS, shown=0)
    assert figure.data.to_dict("records") == charts.timeline_rows([rejected, bonus], LABELS, shown=0)
    spec = figure.spec
    assert "data" not in spec and "datasets" not in spec  # the rows go beside the spec, the same every Step
    assert charts.timeline_chart([], LABELS, shown=-1).spec == spec
    assert spec["params"][0]["name"] == charts.TIMELINE_PICK
    assert spec["params"][0]["select"]["fields"] == ["round"]
