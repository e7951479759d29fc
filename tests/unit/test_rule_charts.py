"""The rule on trial's chart builders, and the round view's stage-3 chart under each rule: plain data
in, figures out (no model, no Streamlit)."""

from dataclasses import replace

from hand_traces import LABELS, trace

from specdec.views import charts

ROWS = [
    {"rule": "speculative", "title": "speculative sampling", "lossless": True, "alpha": 0.95,
     "tv": 0.09},
    {"rule": "top-choice", "title": "the top choice <b>matches</b>", "lossless": False, "alpha": 0.9,
     "tv": 0.33},
]


def test_trial_chart_puts_acceptance_against_distance_beside_the_floor():
    fig = charts.rule_trial_chart(ROWS, noise_band=0.07)
    points = {trace.name: (trace.x[0], trace.y[0]) for trace in fig.data}
    assert points["speculative sampling (lossless)"] == (0.09, 0.95)
    assert fig.data[1].marker.symbol == "x" and fig.data[0].marker.symbol == "circle"  # lossy: a cross
    assert fig.layout.shapes[0].x1 == 0.07  # the noise band
    # speculative sampling at TV 0.09 is outside a band of 0.07: the title says so, not the lesson's claim
    assert fig.layout.title.text.startswith("speculative sampling fell outside the noise band")
    assert "<b>" not in fig.data[1].text[0]  # titles are escaped
    assert fig.layout.xaxis.range[1] > 0.33


def test_the_trial_headline_reads_the_run():
    inside = [dict(ROWS[0], tv=0.05), ROWS[1]]
    expected = "The lossless rules fall inside the noise band, the lossy ones outside it"
    assert charts.band_headline(inside, 0.07) == expected
    hidden = [dict(ROWS[0], tv=0.05), dict(ROWS[1], tv=0.02)]
    assert "and so does the top choice <b>matches</b> (lossy)" in charts.band_headline(hidden, 0.07)
    assert "outside" in charts.band_headline(ROWS, 0.07) and "1 run in 20" in charts.band_headline(ROWS, 0.07)


def test_sweep_chart_has_measured_expected_and_speedup_per_set():
    rows = [{"temperature": t, "category": c, "alpha": 0.5, "expected_alpha": 0.45, "speedup": 1.2}
            for t in (1.0, 0.0) for c in ("code", "prose")]
    fig = charts.temperature_sweep_chart(rows)
    assert [t.name for t in fig.data] == [f"{c}: {what}" for c in ("code", "prose")
                                          for what in ("measured", "Σ min(p, q)", "speed-up")]
    assert list(fig.data[0].x) == [0.0, 1.0]  # sorted by temperature
    assert fig.data[2].xaxis == "x2"  # speed-up in its own panel, with the 1x line
    assert any(shape.y0 == 1.0 for shape in fig.layout.shapes)


def test_stage_three_chart_follows_the_rule():
    typical = replace(trace(uniforms=None), rule="typical", thresholds=[0.09, 0.2, 0.05],
                      accept_probs=[1, 0, 0])
    fig = charts.acceptance_chart(typical, LABELS)
    assert "typical acceptance" in fig.layout.title.text
    assert list(fig.data[1].x) == [0.09, 0.2, 0.05]  # the bar p(x) must clear, per draft
    compare = replace(trace(uniforms=None), rule="sample-compare", target_draws=[1, 4, 2],
                      accept_probs=[0.5, 0.3, 0.15])
    fig = charts.acceptance_chart(compare, LABELS)
    assert "sample and compare" in fig.layout.title.text
    assert [t for t in fig.data if getattr(t, "mode", None) == "text"][0].text == ("y = ␣the", "y = dog")
    top = replace(trace(uniforms=None), rule="top-choice")
    assert "top-choice rule" in charts.acceptance_chart(top, LABELS).layout.title.text
    assert "greedy rule" in charts.acceptance_chart(trace(uniforms=None), LABELS).layout.title.text


def test_exact_law_chart_puts_p_beside_each_rules_law():
    rows = [{"id": 7, "token": "<b>Once</b>", "p": 0.77, "speculative": 0.77, "top-choice": 0.77},
            {"id": 9, "token": " One", "p": 0.14, "speculative": 0.14, "top-choice": 0.14}]
    rules = [("speculative", "speculative sampling"), ("top-choice", "top choice")]
    fig = charts.exact_law_chart(rows, rules)
    assert [t.name for t in fig.data] == ["p: the target alone", "speculative sampling", "top choice"]
    assert list(fig.data[2].y) == [0.77, 0.14] and fig.layout.barmode == "group"
    assert "<b>" not in fig.data[0].x[0]  # token text is escaped
    assert fig.data[1].marker.color != fig.data[2].marker.color
