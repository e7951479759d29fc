"""The app through streamlit.testing.v1.AppTest, pointed at the tiny pair: pages, buttons, errors."""

import time

import pytest
from app_driver import APP, ROUNDS, XSS, assert_clean, errors, make_app, metrics
from streamlit.testing.v1 import AppTest


def test_home_page_loads(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs)
    assert_clean(at)
    assert not errors(at)
    assert "step by step" in at.title[0].value


def test_environment_names_the_models(tiny_pair_dirs, monkeypatch):
    monkeypatch.setenv("SPECDEC_TARGET", tiny_pair_dirs["target"])
    monkeypatch.setenv("SPECDEC_DRAFTER", "ngram")
    monkeypatch.setenv("SPECDEC_CHAT", "0")
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert_clean(at)
    assert at.session_state["target"] == tiny_pair_dirs["target"] and not at.session_state["chat"]


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_step_back_reset_and_every_stage(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, ROUNDS)
    assert_clean(at)
    assert metrics(at)["Rounds"] == "0"
    at.button(key="b_step").click().run()
    at.button(key="b_step").click().run()
    assert_clean(at)
    # Stage 1 of round 2 (the stages animate in a browser): the counters still stand before it.
    assert metrics(at)["Rounds"] == "1" and metrics(at)["Target passes"] == "1"
    at.segmented_control(key="stage").set_value(5).run()
    assert metrics(at)["Rounds"] == "2" and metrics(at)["Target passes"] == "2"
    assert int(metrics(at)["Tokens emitted"]) >= 2
    for stage in [1, 2, 3, 4, 5]:
        at.segmented_control(key="stage").set_value(stage).run()
        assert_clean(at)
    assert any("sd-tok" in m.value for m in at.markdown)  # the output line
    at.button(key="b_back").click().run()
    assert metrics(at)["Rounds"] == "1"
    at.button(key="b_reset").click().run()
    assert_clean(at)
    assert metrics(at)["Rounds"] == "0"


@pytest.mark.slow  # about a second on a 2-core machine: the whole suite runs it
def test_feature_head_shows_what_it_read(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, ROUNDS, drafter=tiny_pair_dirs["head"])
    at.button(key="b_step").click().run()
    at.segmented_control(key="stage").set_value(1).run()
    assert_clean(at)
    assert not errors(at)
    assert any("What the feature head read" in m.value for m in at.markdown)
    trace = at.session_state["stepper"].traces[-1]
    assert trace.drafted_by == "feature head" and len(trace.head_read.feature) == 32  # the tiny width
    # The hidden state it read, and q at the first draft (if it drafted any).
    assert len(at.get("plotly_chart")) == 1 + (trace.num_drafted > 0)


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_same_settings_same_rounds(tiny_pair_dirs):
    runs = []
    for _ in range(2):
        at = make_app(tiny_pair_dirs, ROUNDS, seed=7)
        for _ in range(3):
            at.button(key="b_step").click().run()
        runs.append([t.emitted_tokens for t in at.session_state["stepper"].traces])
    assert runs[0] == runs[1] and len(runs[0]) == 3


def test_changing_the_prompt_starts_a_fresh_run(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, ROUNDS)
    at.button(key="b_step").click().run()
    at.text_area(key="_prompt_w").input("for i in range(10):\n    print(i)\n").run()
    assert_clean(at)
    assert metrics(at)["Rounds"] == "0"


def test_greedy_mode_shows_the_argmax_rule(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, ROUNDS, temperature=0.0)
    at.button(key="b_step").click().run()
    at.segmented_control(key="stage").set_value(3).run()
    assert_clean(at)
    text = " ".join(m.value for m in at.markdown)
    assert "Greedy mode" in text and "u ~ Uniform" not in text


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ({"prompt": "   "}, "the prompt is empty"),
        ({"prompt": "word " * 400}, "exceeds the target's context"),
        ({"target": "/no/such/model/folder"}, "could not load model '/no/such/model/folder'"),
        ({"drafter": "other_tokenizer"}, "tokenizers differ"),
        ({"target": ""}, "target model name is empty"),
    ],
    ids=["empty-prompt", "long-prompt", "missing-folder", "mismatched-pair", "empty-target"],
)
def test_bad_input_shows_a_message_not_a_traceback(tiny_pair_dirs, state, message):
    if state.get("drafter") == "other_tokenizer":
        state = {"drafter": tiny_pair_dirs["other_tokenizer"]}
    at = make_app(tiny_pair_dirs, ROUNDS, **state)
    assert_clean(at)
    assert any(message in e for e in errors(at)), errors(at)
    # The rest of the app keeps working: the home page and a good prompt.
    at.switch_page("app_pages/home.py").run()
    assert_clean(at)


def test_untrusted_text_is_escaped(tiny_pair_dirs, monkeypatch):
    from specdec.views.stepper import Stepper

    monkeypatch.setattr(Stepper, "label", lambda self, token_id: XSS)
    at = make_app(tiny_pair_dirs, ROUNDS, prompt=XSS, drafter="ngram")
    for _ in range(2):
        at.button(key="b_step").click().run()
    html_seen, plain = [], []
    for stage in [1, 2, 3, 4, 5]:
        at.segmented_control(key="stage").set_value(stage).run()
        assert_clean(at)
        html_seen += [m.value for m in at.markdown if m.proto.allow_html]
        plain += [m.value for m in at.markdown if not m.proto.allow_html]
    assert "` <script>alert(1)</script>" in "\n".join(plain)  # inline code: Streamlit escapes it
    everything = "\n".join(html_seen)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in everything
    assert "<script" not in everything.lower() and "<img" not in everything.lower()


def test_the_url_carries_prompt_and_settings(tiny_pair_dirs):
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["target"] = tiny_pair_dirs["target"]
    at.session_state["drafter"] = tiny_pair_dirs["draft"]
    at.query_params.update({"gamma": "2", "seed": "11", "chat": "0", "prompt": "The quick brown fox"})
    at.run()
    at.switch_page(ROUNDS).run()
    assert_clean(at)
    assert at.session_state["gamma"] == 2 and at.session_state["seed"] == 11
    assert at.session_state["prompt"] == "The quick brown fox"
    assert at.session_state["stepper"].settings.gamma == 2
    assert at.query_params["gamma"] == ["2"] or at.query_params["gamma"] == "2"


def warnings(at: AppTest) -> list[str]:
    return [w.value for w in at.warning]


def test_link_values_out_of_range_are_clamped_with_a_notice(tiny_pair_dirs):
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["target"] = tiny_pair_dirs["target"]
    at.session_state["drafter"] = tiny_pair_dirs["draft"]
    at.query_params.update({"gamma": "-1", "top_p": "0", "max_new_tokens": "999999", "temperature": "nan",
                            "prompt": "The quick brown fox"})
    at.run()
    assert_clean(at)
    said = " ".join(warnings(at))
    assert "gamma=-1 is out of range: using the smallest allowed, 1" in said
    assert "top_p=0 is out of range" in said and "max_new_tokens=999999" in said
    assert "temperature='nan' is not a valid value: using the default, 1.0" in said
    state = at.session_state
    shown = (state["gamma"], state["top_p"], state["max_new_tokens"], state["temperature"])
    assert shown == (1, 0.05, 256, 1.0)
    assert at.slider(key="w_temperature").value == 1.0  # a working slider, not a broken one
    at.switch_page(ROUNDS).run()
    assert_clean(at)
    assert not any("From the link" in w for w in warnings(at))  # said once, not on every page


def count_loads(monkeypatch, fail_with: str | None = None) -> list:
    """Replace ModelPair.load by a counter (that fails with `fail_with`, if given)."""
    from specdec.errors import SpecDecError
    from specdec.models.pair import ModelPair

    calls, real = [], ModelPair.load.__func__

    def load(cls, target, drafter=None):
        calls.append((target, drafter))
        if fail_with:
            raise SpecDecError(fail_with)
        return real(cls, target, drafter)

    monkeypatch.setattr(ModelPair, "load", classmethod(load))
    return calls


def test_a_link_naming_a_model_off_the_allow_list_loads_nothing(tiny_pair_dirs, monkeypatch):
    monkeypatch.setenv("SPECDEC_ALLOWED_MODELS", f"{tiny_pair_dirs['target']},{tiny_pair_dirs['draft']}")
    calls = count_loads(monkeypatch)
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["target"] = tiny_pair_dirs["target"]
    at.query_params.update({"drafter": "gpt2"})
    at.run()
    assert_clean(at)
    assert any("this server does not load the drafter 'gpt2'" in e for e in errors(at)), errors(at)
    assert calls == []


@pytest.mark.slow  # about a second on a 2-core machine: the whole suite runs it
def test_a_failed_load_is_remembered_until_retried(tiny_pair_dirs, monkeypatch, tmp_path):
    # A folder that exists, so the name passes the check made before loading (specdec.model_names),
    # and whose load fails.
    (tmp_path / "nowhere" / "model").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    calls = count_loads(monkeypatch, fail_with="could not load model 'nowhere/model': offline")
    at = make_app(tiny_pair_dirs, target="nowhere/model")
    for _ in range(100):  # the load runs in the background (another test's load may hold the models' lock)
        if not any(info.value.startswith("Loading the models") for info in at.sidebar.info):
            break
        time.sleep(0.1)
        at.run()
    at.run()
    at.run()
    assert_clean(at)
    assert any("could not load model 'nowhere/model'" in e for e in errors(at))
    # once, not on every rerun; the target is loaded alone (n-gram drafter), the drafter added to it
    assert calls == [("nowhere/model", "ngram")]
    at.button(key="b_retry_load").click().run()
    assert len(calls) == 2


def test_a_mistyped_name_is_refused_before_anything_loads(tiny_pair_dirs, monkeypatch):
    """A bundled name that is not shipped, as a link or the sidebar gives it: its one line, and no load."""
    monkeypatch.setenv("SPECDEC_ALLOWED_MODELS", "*")
    calls = count_loads(monkeypatch)
    at = make_app(tiny_pair_dirs, target="bundled:SmolLM2-135M-Instruckt")
    for _ in range(100):  # the load runs in the background
        if not any(info.value.startswith("Loading the models") for info in at.sidebar.info):
            break
        time.sleep(0.1)
        at.run()
    at.run()
    assert_clean(at)
    assert any("no such bundled model" in e for e in errors(at)), errors(at)
    assert calls == []


def test_a_prompt_over_the_servers_cap_is_a_message(tiny_pair_dirs, monkeypatch):
    monkeypatch.setenv("SPECDEC_MAX_PROMPT_CHARS", "40")
    at = make_app(tiny_pair_dirs, ROUNDS, prompt="x" * 41)
    assert_clean(at)
    assert any("this server accepts at most 40" in e for e in errors(at)), errors(at)


def test_stop_keeps_what_a_long_run_measured(tiny_pair_dirs):
    """The shared helper saves after every step: a Stop (here, the flag set mid-run) keeps the work."""

    def script():
        import streamlit as st

        from app_pages import ui

        def steps():
            for i in range(5):
                if i == 2:
                    st.session_state["_stop"] = True
                yield i

        saved = {}
        ui.run_with_progress(steps(), 5, str, "_stop", lambda items, finished: saved.update(
            items=list(items), finished=finished))
        st.write(f"saved {saved['items']} finished={saved['finished']}")

    at = AppTest.from_function(script, default_timeout=30).run()
    assert_clean(at)
    assert at.markdown[0].value == "saved [0, 1, 2] finished=False"


def test_bad_server_limits_in_the_environment_are_a_message_not_a_traceback(tiny_pair_dirs, monkeypatch):
    monkeypatch.setenv("SPECDEC_PREFILL_CHUNK", "lots")
    at = make_app(tiny_pair_dirs)  # the frame's first run draws the sidebar
    assert_clean(at)
    assert any("SPECDEC_PREFILL_CHUNK must be a whole number" in w for w in warnings(at)), warnings(at)
    at.switch_page(ROUNDS).run()
    at.button(key="b_step").click().run()
    assert_clean(at)
    at.segmented_control(key="stage").set_value(5).run()  # the round's outcome, past its test
    assert metrics(at)["Rounds"] == "1"


def test_home_draws_the_round_and_links_each_step_to_its_page(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs)
    assert_clean(at)
    assert len(at.get("graphviz_chart")) == 1
    links = [link.proto.page for link in at.get("page_link")]
    assert {"rounds", "idle-machine", "rule-trial", "guarantee", "speedup"} <= set(links), links


def test_out_of_memory_in_a_round_is_one_message_with_what_to_try(tiny_pair_dirs, monkeypatch):
    import torch

    from specdec.views import stepper
    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        yield  # a generator of rounds, as the real one

    monkeypatch.setattr(stepper, "rounds", out_of_memory)
    at = make_app(tiny_pair_dirs, ROUNDS)
    at.button(key="b_step").click().run()
    assert_clean(at)
    assert any("out of memory on the GPU" in e and "smaller pair" in e for e in errors(at)), errors(at)
