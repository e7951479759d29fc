"""The page "A class is a batch" in AppTest with the tiny pair: a full run fills the charts and the
table, Stop keeps what was measured, and a feature head is refused in one line. (The quick default:
tests/app/test_quick_runs.py.)"""

import pytest
from app_driver import assert_clean, errors, make_app

PAGE = "app_pages/batch_class.py"


def markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_a_full_run_measures_every_batch_size_and_the_cost_curve(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, PAGE, gamma=2, temperature=0.0)
    assert_clean(at)
    assert not errors(at)
    assert "Thirty students" in markdown(at) and "Decode the class" in at.info[0].value
    at.slider(key="_bc_tokens").set_value(8)
    at.slider(key="_bc_prompts").set_value(2).run()
    at.button(key="b_bc_full").click().run()
    assert_clean(at)
    assert not errors(at)
    rows = at.table[0].value.to_dict("records")
    assert [r["B"] for r in rows] == [1, 2, 4, 8, 16]
    assert all(r["target only tok/s"] > 0 and r["speculative tok/s"] > 0 and r["expected ratio"] > 0
               for r in rows)
    assert len(at.get("plotly_chart")) == 3  # throughput, cost curve, ratio
    text = markdown(at)
    assert "memory-bound" in text and "vLLM" in text and "thirty students are a batch" in text


def test_stop_keeps_the_partial_run(tiny_pair_dirs, monkeypatch):
    """Stop pressed while B = 1 was measured: the loop ends there, and what it measured stays shown."""
    from specdec.measure import batching
    at = make_app(tiny_pair_dirs, PAGE, gamma=2)
    at.slider(key="_bc_tokens").set_value(8)
    at.slider(key="_bc_prompts").set_value(1).run()
    original = batching.class_run

    def stopped_after_the_first_step(*args, **kwargs):
        for item in original(*args, **kwargs):
            at.session_state["_bc_stop"] = True  # what the Stop button's callback sets
            yield item

    monkeypatch.setattr(batching, "class_run", stopped_after_the_first_step)
    at.button(key="b_bc_run").click().run()
    assert_clean(at)
    assert "Stopped" in at.warning[0].value
    assert [r["B"] for r in at.table[0].value.to_dict("records")] == [1]
    text = markdown(at)  # a partial run claims no 'never' (B = 1 may already be slower with tiny models)
    assert "never fell" not in text and ("measured before the stop" in text or "first falls below 1" in text)


def test_a_feature_head_is_refused_in_one_line(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, PAGE, drafter=tiny_pair_dirs["head"])
    assert_clean(at)
    refusals = [e for e in errors(at) if "feature head" in e]
    assert len(refusals) == 1 and "\n" not in refusals[0]
