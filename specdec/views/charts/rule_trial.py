"""The rule on trial: acceptance against distance, and the exact rule over temperature."""

from __future__ import annotations

import html

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specdec.views.charts.style import (
    INK,
    LANE_COLORS,
    PLAIN_COLOR,
    THEORY_COLOR,
    narrow,
    styled,
    token_names,
)

RULE_COLORS = {"speculative": "#2e7d32", "top-choice": "#c62828", "sample-compare": "#1e88e5",
               "typical": "#ef6c00",
               # the multi-candidate rules (config.TREE_RULE_NAMES): exact in greens and blues, lossy warm
               "without-replacement": "#2e7d32", "with-replacement": "#1e88e5", "q-kept": "#ef6c00",
               "top-k-as-sampled": "#c62828"}


def band_headline(rows: list[dict], noise_band: float) -> str:
    """What this run's numbers say about the band (`rows`: title, lossless, tv): the lossless rules
    inside it, the lossy ones outside, or which fell where they should not, in so many words."""
    def names(group):
        return " and ".join(r["title"] for r in group)

    outside = [r for r in rows if r["lossless"] and r["tv"] > noise_band]
    hidden = [r for r in rows if not r["lossless"] and r["tv"] <= noise_band]
    if outside:
        return f"{names(outside)} fell outside the noise band this run: by chance alone, about 1 run in 20"
    if hidden:
        return f"The lossless rules fall inside the noise band, and so does {names(hidden)} (lossy) here"
    return "The lossless rules fall inside the noise band, the lossy ones outside it"


def rule_trial_chart(rows: list[dict], noise_band: float) -> go.Figure:
    """Acceptance against distance from the target, one point per rule (`rows`: rule, title,
    lossless, alpha, tv), with the noise floor as a band [0, `noise_band`] (95 % of the target-only
    re-splits' TVs): a lossless rule falls inside it about 19 times in 20, a lossy one to its right.
    The title says what this run shows (`band_headline`)."""
    fig = go.Figure()
    fig.add_vrect(x0=0, x1=noise_band, fillcolor="#9e9e9e", opacity=0.18, line_width=0,
                  annotation_text="noise band (95 %)", annotation_position="top left")
    label_at = ["top center", "bottom center", "middle right", "middle left"]  # apart where points meet
    for number, row in enumerate(rows):
        kind = "lossless" if row["lossless"] else "lossy"
        fig.add_scatter(x=[row["tv"]], y=[row["alpha"]], mode="markers+text",
                        name=f"{row['title']} ({kind})",
                        marker={"size": 16, "color": RULE_COLORS.get(row["rule"], THEORY_COLOR),
                                "symbol": "circle" if row["lossless"] else "x"},
                        text=[html.escape(row["title"])], textposition=label_at[number % len(label_at)],
                        hovertemplate="TV %{x:.3f}, acceptance %{y:.2f}<extra></extra>")
    top = max([noise_band, *(r["tv"] for r in rows)]) * 1.25 + 0.02
    fig.update_xaxes(range=[0, top], title_text="TV distance from the target's first tokens")
    fig.update_yaxes(range=[0, 1.08], title_text="acceptance α (drafts kept / tested)")
    fig.update_layout(showlegend=False)
    return styled(fig, band_headline(rows, noise_band), height=380)


def temperature_sweep_chart(rows: list[dict]) -> go.Figure:
    """The exact rule per prompt set over temperature (`rows`: temperature, category, alpha,
    expected_alpha, speedup): acceptance measured (solid) and expected from Σ min(p, q) (dotted),
    and the speed-up on a second axis."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("acceptance α", "speed-up over the target alone"))
    for number, category in enumerate(dict.fromkeys(r["category"] for r in rows)):
        mine = sorted((r for r in rows if r["category"] == category), key=lambda r: r["temperature"])
        color = LANE_COLORS[(number + 1) % len(LANE_COLORS)]
        x = [r["temperature"] for r in mine]
        fig.add_scatter(x=x, y=[r["alpha"] for r in mine], mode="lines+markers", row=1, col=1,
                        name=f"{category}: measured", line={"color": color})
        fig.add_scatter(x=x, y=[r["expected_alpha"] for r in mine], mode="lines", row=1, col=1,
                        line={"color": color, "dash": "dot"}, name=f"{category}: Σ min(p, q)")
        fig.add_scatter(x=x, y=[r["speedup"] for r in mine], mode="lines+markers", row=1, col=2,
                        line={"color": color}, marker={"symbol": "diamond"},
                        name=f"{category}: speed-up")
    fig.add_hline(y=1.0, line_dash="dash", line_color=PLAIN_COLOR, row=1, col=2)
    fig.update_yaxes(range=[0, 1.05], row=1, col=1)
    fig.update_yaxes(rangemode="tozero", row=1, col=2)
    fig.update_xaxes(title_text="temperature (0 = greedy)")
    return styled(fig, "The exact rule at every temperature", height=440)  # the house legend: below


def exact_law_chart(rows: list[dict], rules: list[tuple[str, str]], title: str | None = None) -> go.Figure:
    """p against each rule's exact law over the tokens that matter (`rows`: token, p and one value per
    rule name; `rules`: (name, title) in order): a lossless rule's bars stand level with p's, a lossy
    one's show where the mass moved."""
    labels = token_names(list(range(len(rows))), {i: row["token"] for i, row in enumerate(rows)})
    fig = go.Figure()
    fig.add_bar(x=labels, y=[row["p"] for row in rows], name="p: the target alone", marker_color=INK,
                hovertemplate="p = %{y:.4f}<extra></extra>")
    for name, rule_title in rules:
        fig.add_bar(x=labels, y=[row[name] for row in rows], name=html.escape(rule_title),
                    marker_color=RULE_COLORS.get(name, THEORY_COLOR),
                    hovertemplate=f"{html.escape(rule_title)}: %{{y:.4f}}<extra></extra>")
    fig.update_yaxes(title_text="probability of the first token", rangemode="tozero")
    fig.update_layout(barmode="group")
    fig = styled(fig, title or "What each rule emits here, exactly, against p", height=380)
    return narrow(fig, len(rows))
