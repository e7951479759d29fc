"""Presenter mode, the sidebar's two levels and a cold server's first page (AppTest, tiny pair)."""


import plotly.graph_objects as go
import pytest
from app_driver import APP
from streamlit.testing.v1 import AppTest

from specdec.views.charts.style import PRESENTER_SCALE, PROJECTOR_MIN_SIZE, TEXT_SIZE, for_projector, styled

EVERYDAY = ["Drafter", "Draft length γ", "Temperature (0 = greedy)", "Acceptance rule"]
MACHINERY = ["Price each draft by this machine's passes", "Stop drafting below this confidence"]


def app(tiny_pair_dirs, **params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["target"] = tiny_pair_dirs["target"]
    at.session_state["drafter"] = tiny_pair_dirs["draft"]
    for name, value in params.items():
        at.query_params[name] = value
    return at.run()


def sidebar_labels(container) -> list[str]:
    return [w.label for kind in ("toggle", "slider", "selectbox", "number_input", "text_input")
            for w in getattr(container, kind)]


@pytest.mark.slow  # about a second on a 2-core machine: the whole suite runs it
def test_a_link_with_presenter_1_turns_presenter_mode_on(tiny_pair_dirs):
    at = app(tiny_pair_dirs, presenter="1")
    assert not at.exception
    assert at.session_state["presenter"] is True
    assert at.sidebar.toggle(key="w_presenter").value is True
    assert not any("Start here" in m.value for m in at.markdown)  # fewer words on the page
    plain = app(tiny_pair_dirs)
    assert plain.session_state["presenter"] is False
    assert any("Start here" in m.value for m in plain.markdown)


def test_everyday_controls_first_machinery_under_advanced(tiny_pair_dirs):
    at = app(tiny_pair_dirs)
    advanced = next(e for e in at.sidebar.expander if e.label == "Advanced")
    inside = sidebar_labels(advanced)
    assert all(label in inside for label in MACHINERY), inside
    assert not any(label in inside for label in EVERYDAY), inside
    assert all(label in sidebar_labels(at.sidebar) for label in EVERYDAY)


def test_the_status_box_names_models_without_their_kernels(tiny_pair_dirs):
    at = app(tiny_pair_dirs)
    at.switch_page("app_pages/rounds.py").run()  # a page that needs the models waits for them
    assert not at.exception
    status = " ".join(c.value for c in at.sidebar.caption)
    assert "M parameters" in status
    assert "matmul" not in status and "packed" not in status and "columns" not in status


def test_for_projector_enlarges_every_text_and_leaves_the_original():
    fig = go.Figure(go.Bar(x=["a", "b"], y=[1, 2], texttemplate="%{y}"))
    fig.add_annotation(text="note", x=0, y=1)
    fig = styled(fig, "title", height=300)
    big = for_projector(fig)
    grown = max(PROJECTOR_MIN_SIZE, round(TEXT_SIZE * PRESENTER_SCALE))  # never under 20 px
    assert grown >= 20
    assert big.layout.font.size == grown and big.layout.xaxis.tickfont.size == grown
    assert big.layout.yaxis.title.font.size == grown and big.layout.annotations[0].font.size == grown
    assert big.layout.title.font.size > fig.layout.title.font.size
    assert big.layout.height > 300
    assert fig.layout.xaxis.tickfont.size == TEXT_SIZE  # the cached figure is not changed
    assert fig.layout.xaxis.tickfont.color == big.layout.xaxis.tickfont.color  # dark ink kept


def test_the_round_timeline_grows_in_presenter_mode_too():
    from specdec.views.charts.rounds import _timeline_spec
    from specdec.views.charts.style import spec_for_projector

    spec = _timeline_spec()
    big = spec_for_projector(spec)
    grown = max(PROJECTOR_MIN_SIZE, round(TEXT_SIZE * PRESENTER_SCALE))
    assert big["config"]["axis"]["labelFontSize"] == grown
    assert big["config"]["legend"]["labelFontSize"] > TEXT_SIZE
    assert "config" not in spec or spec["config"] is not big["config"]  # the shared spec is not changed
    assert big["layer" if "layer" in spec else "mark"] == spec["layer" if "layer" in spec else "mark"]


def test_a_long_chart_title_breaks_once_at_a_separator():
    from specdec.views.charts.style import two_lines

    assert two_lines("Tokens per target pass (2 prompts each; bar: median)") == \
        "Tokens per target pass<br>(2 prompts each; bar: median)"
    assert two_lines("Throughput: speculation stops paying at B = 2") == \
        "Throughput:<br>speculation stops paying at B = 2"
    assert two_lines("accept if u < min(1, p/q)") == "accept if u &lt; min(1, p/q)"  # short: one line
    assert two_lines("a title with no separator at all but very very long") == \
        "a title with no separator at all but very very long"
