"""The room's answers on the projector: bars per option, or a histogram per slider, and on reveal the
measured truth beside them (the right option in green, a line at the measured value and one at the
room's median guess)."""

from __future__ import annotations

import html
import math
import statistics

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specdec.classroom.questions import Tally
from specdec.views.charts.style import ACCEPT_COLOR, MUTED_COLOR, P_COLOR, RESIDUAL_COLOR, styled

BINS = 10  # a slider's range in this many equal bins


def class_answers_chart(result: Tally, truth: tuple[float, ...] | None = None) -> go.Figure:
    """The room's answers to one question; `truth` (the measured answer) once revealed."""
    question = result.question
    title = f"The room's answers ({result.count})"
    if question.is_choice:
        return styled(_options_figure(result, truth), title, height=300)
    return styled(_sliders_figure(result, truth), title, height=300)


def _options_figure(result: Tally, truth: tuple[float, ...] | None) -> go.Figure:
    right = {int(i) for i in truth or ()}
    names = [f"{chr(65 + i)}. {html.escape(_short(text))}" for i, text in enumerate(result.question.options)]
    colors = [ACCEPT_COLOR if i in right else (MUTED_COLOR if right else P_COLOR) for i in range(len(names))]
    fig = go.Figure(go.Bar(y=names, x=list(result.per_option), orientation="h", marker_color=colors,
                           text=[str(n) for n in result.per_option], textposition="auto",
                           hovertemplate="%{y}: %{x} answer(s)<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text="answers", rangemode="tozero", dtick=max(1, math.ceil(max(result.per_option,
                                                                                       default=1) / 8)))
    return fig


def _sliders_figure(result: Tally, truth: tuple[float, ...] | None) -> go.Figure:
    """One histogram per slider; its title names the room's median (dotted line) and, once revealed,
    the measured value (green line): in the title, since the two lines are often close."""
    question, unit = result.question, result.question.unit
    titles = []
    for i, (name, values) in enumerate(zip(question.parts, result.values, strict=True)):
        words = [f"median {statistics.median(values):.3g}{unit}"] if values else ["no answers"]
        words += [f"measured {truth[i]:.3g}{unit}"] if truth is not None else []
        titles.append(f"{html.escape(name) + ': ' if name else ''}{', '.join(words)}")
    fig = make_subplots(rows=1, cols=len(question.parts), subplot_titles=titles, shared_yaxes=True)
    width = (question.high - question.low) / BINS
    for col, values in enumerate(result.values, start=1):
        counts = [0] * BINS
        for value in values:
            counts[min(BINS - 1, int((value - question.low) / width))] += 1
        centers = [question.low + (i + 0.5) * width for i in range(BINS)]
        fig.add_bar(x=centers, y=counts, width=width * 0.9, marker_color=P_COLOR, showlegend=False,
                    row=1, col=col,
                    hovertemplate=f"%{{x:.3g}}{unit} ± {width / 2:.3g}: %{{y}} answer(s)<extra></extra>")
        if values:
            fig.add_vline(x=statistics.median(values), line_dash="dot", line_width=3,
                          line_color=RESIDUAL_COLOR, row=1, col=col)
        if truth is not None:
            fig.add_vline(x=truth[col - 1], line_width=4, line_color=ACCEPT_COLOR, row=1, col=col)
        fig.update_xaxes(range=[question.low, question.high], title_text=unit or None, row=1, col=col)
    fig.update_yaxes(title_text="answers", rangemode="tozero", gridcolor="#eeeeee")
    return fig


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
