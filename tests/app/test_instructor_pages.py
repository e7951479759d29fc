"""The instructor pages in AppTest with the tiny pair: each loads, runs its main action, shows results."""

import json

import pytest
from app_driver import assert_clean, errors, make_app, metrics
from streamlit.testing.v1 import AppTest

SPEEDUP, SETS, GUARANTEE = "app_pages/speedup.py", "app_pages/code_vs_prose.py", "app_pages/guarantee.py"
IDLE, VARIANTS = "app_pages/idle_machine.py", "app_pages/variants.py"
PAGES = [SPEEDUP, SETS, GUARANTEE, IDLE, VARIANTS]


def charts(at: AppTest) -> int:
    return len(at.get("plotly_chart"))


@pytest.mark.parametrize("page", PAGES)
def test_every_page_loads(tiny_pair_dirs, page):
    at = make_app(tiny_pair_dirs, page)
    assert_clean(at)
    assert not errors(at)


@pytest.mark.slow  # a 40-token race and a sweep over γ through the page, ~8 s; the page loads in
# test_every_page_loads, the race and the sweep themselves run in test_measure_timing
def test_speedup_race_and_sweep(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, SPEEDUP, max_new_tokens=40, gamma=3)  # several chart redraws
    at.button(key="b_race").click().run()
    assert_clean(at)
    shown = metrics(at)
    assert shown["Measured speed-up"].endswith("x") and shown["Theory (paper)"].endswith("x")
    assert charts(at) >= 5  # race, cumulative, per round, histogram, the curve over α
    at.button(key="b_sweep").click().run()
    assert_clean(at)
    assert any("Best measured: γ =" in c.value for c in at.caption)


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_prompt_sets_quiz_and_reload(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, SETS)
    at.number_input(key="_cp_per_cat").set_value(1)
    at.number_input(key="_cp_tokens").set_value(6).run()
    at.button(key="b_sets").click().run()
    assert_clean(at)
    assert charts(at) == 3
    assert {row["category"] for row in at.dataframe[0].value.to_dict("records")} == {
        "code", "structured", "prose", "creative", "copy-heavy"
    }
    summary = {row["category"]: row for row in at.dataframe[1].value.to_dict("records")}  # [0]: the sets
    question = at.radio(key="_cp_quiz").label  # the run's own numbers, not the lesson's fixed ones
    code, prose = summary["code"]["speedup"], summary["prose"]["speedup"]
    assert f"code ran at {code:.2f}× and prose at {prose:.2f}×" in question
    assert figure(at)["layout"]["xaxis"]["title"]["text"] == "1 prompt each; bar: median"
    at.radio(key="_cp_quiz").set_value("predictability").run()
    assert_clean(at)
    assert any("Right." in s.value for s in at.success)
    at.radio(key="_cp_quiz").set_value("temperature").run()
    wrong = next(e for e in errors(at) if "Not the main reason" in e)
    assert "**code** kept" in wrong and "**prose** kept" in wrong  # the kinds the question asks about


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_guarantee_toy_sampling_and_greedy(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, GUARANTEE)
    assert_clean(at)
    assert metrics(at)["P(draft accepted) = Σ min(p, q)"] == "0.750"  # Σ min(p, q) of the default table
    at.text_input(key="_gu_prompt").input("def add(a, b):")
    at.number_input(key="_gu_samples").set_value(30).run()
    at.button(key="b_sample").click().run()
    assert_clean(at)
    shown = metrics(at)
    assert 0 <= float(shown["TV distance"]) <= 1 and 0 <= float(shown["χ² p-value"]) <= 1
    bars = figure(at, 1)["data"]  # [0]: the toy playground
    assert bars[0]["name"] == "exact: the target's p"  # the law the samples are drawn from, beside them
    assert all("array" in bar["error_y"] for bar in bars[1:])  # and each sample's sampling error
    at.button(key="b_greedy").click().run()
    assert_clean(at)
    assert any("Identical" in s.value for s in at.success)
    headings = [m.value for m in at.markdown if m.value.startswith("#####")]  # not captions: presenter mode
    assert [h.split(" ·")[0] for h in headings] == ["##### Speculative", "##### Target alone"]


def test_guarantee_bad_prompt_is_a_message(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, GUARANTEE)
    at.text_input(key="_gu_prompt").input("   ").run()
    assert_clean(at)
    assert any("the prompt is empty" in e for e in errors(at))


def figure(at: AppTest, number: int = 0) -> dict:
    return json.loads(at.get("plotly_chart")[number].proto.spec)


def test_idle_machine_curve_its_table_and_its_words_are_one_measurement(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, IDLE, gamma=3)
    at.slider(key="_im_repeats").set_value(3).run()
    at.button(key="b_cost").click().run()
    assert_clean(at)
    assert charts(at) == 1
    measured = figure(at)["data"][0]
    table = at.table[0].value.to_dict("records")  # under the chart: the chart's data, with the spread
    assert [r["new tokens"] for r in table] == measured["x"]
    assert [float(r["× one token"]) for r in table] == pytest.approx(measured["y"], abs=0.006)
    assert all(float(low) <= float(r["median ms"]) <= float(high)
               for r in table for low, high in [r["fastest–slowest ms"].split("–")])
    words = next(m.value for m in at.markdown if "a one-token pass (its repeats took" in m.value)
    verify = next(r for r in table if r["new tokens"] == 4)  # γ + 1
    assert f"costs **{verify['× one token']}×** a one-token pass" in words
    # The y axis fits the measurement, not the "if cost ∝ tokens" line (32× at 32 tokens)
    top = figure(at)["layout"]["yaxis"]["range"][1]
    slowest = max(y + up for y, up in zip(measured["y"], measured["error_y"]["array"], strict=True))
    assert slowest <= top < 32
    assert not any("oneDNN" in c.value or "SPECDEC_MATMUL" in c.value for c in at.caption)


@pytest.mark.slow  # about a second on a 2-core machine: the whole suite runs it
def test_idle_machine_round_breakdown(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, IDLE, max_new_tokens=8)
    at.button(key="b_breakdown").click().run()
    assert_clean(at)
    assert charts(at) == 1
    lean = next(c.value for c in at.caption if c.value.startswith("Lean:"))
    share = int(lean.rsplit("take ", 1)[1].split("%")[0])
    assert 0 < share <= 100


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_variants_races_every_drafter(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, VARIANTS, max_new_tokens=12)
    at.button(key="b_variants").click().run()
    assert_clean(at)
    assert charts(at) == 3  # the race (tokens over compute time), the drafters' speed-ups, the early exit
    assert [t.label for t in at.tabs] == ["target only", "n-gram lookup", "draft model, γ fixed",
                                          "draft model, adaptive", "n-gram, then model, adaptive",
                                          "draft model, tree (auto)", "early exit after layer 1, adaptive"]
    assert any("sd-tok" in m.value for m in at.markdown if m.proto.allow_html)


def test_variants_with_no_draft_model_says_so(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, VARIANTS, drafter="ngram", max_new_tokens=8)
    assert_clean(at)
    assert any("No draft model is configured" in i.value for i in at.info)
    at.button(key="b_variants").click().run()  # still races n-gram lookup against the target alone
    assert_clean(at)
    assert charts(at) == 3 and [t.label for t in at.tabs] == ["target only", "n-gram lookup"]


@pytest.fixture
def dear_passes(monkeypatch):
    """Passes dearer from 2 tokens, for a pair loaded afresh (and forgotten after the test)."""
    from app_pages import ui

    monkeypatch.setenv("SPECDEC_PASS_COSTS", "1,1.5,1.55,1.6")
    ui.pair_shelf.clear()
    yield
    ui.pair_shelf.clear()


@pytest.mark.slow  # about a second on a 2-core machine: the whole suite runs it
def test_idle_machine_prices_each_draft_by_the_passes_timed_at_load(tiny_pair_dirs, dear_passes):
    at = make_app(tiny_pair_dirs, IDLE, gamma=4, draft_threshold=0.1)
    assert_clean(at)
    rows = at.table[0].value.to_dict("records")
    assert [float(r["chance it must beat"]) for r in rows] == pytest.approx([0.5, 0.15, 0.15, 0.1])
    costs = [float(r["pass cost (plain steps)"]) for r in rows]
    assert costs == pytest.approx([1.5, 1.55, 1.6, 1.6])  # 5 tokens: priced as 4
    # Timed on the page, the chart shows these same costs beside its own measurement
    at.slider(key="_im_repeats").set_value(1).run()
    at.button(key="b_cost").click().run()
    at_load = next(t for t in figure(at)["data"] if t["name"] == "timed at load (prices the drafts)")
    assert at_load["x"] == [1, 2, 3, 4, 5] and at_load["y"] == pytest.approx([1.0, 1.5, 1.55, 1.6, 1.6])
    assert at.table[1].value.to_dict("records") == rows
    at.session_state["price_drafts"] = False  # negative control: short passes counted free
    at.run()
    rows = at.table[1].value.to_dict("records")
    assert [float(r["chance it must beat"]) for r in rows] == pytest.approx([0.0, 0.1, 0.1, 0.1])
    assert [t["name"] for t in figure(at)["data"]] == ["measured here (median)", "if cost ∝ tokens",
                                                     "if flat (memory-bound)"]  # free passes: none drawn



@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_the_race_says_why_its_two_texts_differ_above_temperature_zero(tiny_pair_dirs, temperature):
    at = make_app(tiny_pair_dirs, SPEEDUP, temperature=temperature, max_new_tokens=6, gamma=2)
    at.button(key="b_race").click().run()
    assert_clean(at)
    said = any("each run draws its own random numbers" in m.value for m in at.markdown)
    assert said == (temperature > 0)


def test_drafters_are_named_in_the_sidebars_words():
    from app_pages.words import drafter_words
    from specdec.models.pair import LOOKUP_FIRST, NGRAM
    from specdec.paths import BUNDLED_DRAFT

    assert drafter_words(LOOKUP_FIRST + BUNDLED_DRAFT) == "n-gram lookup, then draft model"
    assert drafter_words(BUNDLED_DRAFT) == "draft model (2 layers)"
    assert drafter_words(NGRAM) == "n-gram lookup (no model)"
    assert drafter_words(LOOKUP_FIRST + "my/model") == "n-gram lookup, then my/model"


def face_texts(node) -> list[str]:
    """The words a page shows outside its expanders: markdown (not HTML chips), captions, alerts. Code
    blocks (model output) and folded details left out."""
    if getattr(node, "type", "") == "expander":
        return []
    children = getattr(node, "children", None)
    if children:
        return [text for child in children.values() for text in face_texts(child)]
    if node.type in ("markdown", "caption", "alert") or node.type.startswith(("info", "warning", "success")):
        proto = getattr(node, "proto", None)
        if not getattr(proto, "allow_html", False) and isinstance(getattr(node, "value", None), str):
            return [node.value]
    return []


def long_sentences(texts: list[str], limit: int = 30) -> list[str]:
    import re

    sentences = [s for text in texts for s in re.split(r"(?<=[.!?])\s+|\n+", text)]
    return [s for s in sentences if len(s.split()) > limit]


@pytest.mark.slow  # a race of every drafter on the tiny pair: a few seconds
def test_variants_face_has_short_sentences_and_no_dated_figures(tiny_pair_dirs):
    import re

    at = make_app(tiny_pair_dirs, VARIANTS, max_new_tokens=8)
    at.button(key="b_variants").click().run()
    assert_clean(at)
    texts = face_texts(at.main)
    assert any("EAGLE" in t for t in texts)  # the walk reads the page's words
    assert not long_sentences(texts)
    assert not [t for t in texts if re.search(r"20\d\d-\d\d-\d\d|--[a-z]", t)]  # no dates, no CLI flags
