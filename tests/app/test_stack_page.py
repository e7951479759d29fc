"""'In your stack' with the tiny pair: the live transformers run, the engines' lines, the trap quiz and
the tokenizer check."""

import pytest
from app_driver import assert_clean, errors, make_app

from specdec.measure import stack
from specdec.measure.timing import TimedRun
from specdec.models.pair import ModelPair

STACK = "app_pages/stack.py"


def _texts(at) -> str:
    return "\n".join(c.value for c in at.code) + "\n".join(m.value for m in at.markdown)


@pytest.mark.slow  # about a second on a 2-core machine: the whole suite runs it
def test_stack_page_runs_transformers_and_prints_the_engines_words(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, STACK, temperature=0.0, max_new_tokens=12, gamma=3)
    assert_clean(at)
    assert "assistant_model=draft" in _texts(at) and "--speculative-config" in _texts(at)
    at.button(key="b_stack_run").click().run()
    assert_clean(at)
    assert not errors(at)
    labels = {m.label: m.value for m in at.metric}
    assert set(labels) == {"transformers, target alone", "transformers, assisted", "specdec, target alone",
                           "specdec, speculative"}
    assert all(value.endswith("tok/s") for value in labels.values())
    run = at.session_state["stack_run"]  # transformers' assisted run, counted by forward hooks
    assert run.assisted_target_passes > 0 and run.assisted_draft_passes >= run.assisted_target_passes
    assert run.assisted_tokens / run.assisted_target_passes >= 1
    assert any("the same tokens as" in c.value for c in at.caption)  # greedy: transformers agrees
    assert run.device == "cpu, float32"  # both engines on specdec's device and dtype, and the page says so
    assert any("(cpu, float32, both engines alike)" in c.value for c in at.caption)
    code = "\n".join(c.value for c in at.code)
    assert "SpecDecoding metrics: Mean acceptance length:" in code and "accept len:" in code
    assert "generated)" in code
    # The quiz: the right answer is praised, a wrong one corrected with the run's numbers.
    first = at.radio(key="stack_quiz_0")
    first.set_value(first.options[1]).run()
    assert any(s.value.startswith("Right.") for s in at.success)
    second = at.radio(key="stack_quiz_1")
    second.set_value(second.options[0]).run()
    assert any("Not quite" in e.value for e in at.error)


def test_pair_check_says_which_models_can_draft(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, STACK)
    cases = [(tiny_pair_dirs["padded_draft"], "success"), (tiny_pair_dirs["other_tokenizer"], "error"),
             ("no/such-model-anywhere", "error"), ("ngram", "success")]
    for name, verdict in cases:
        at.text_input[0].set_value(name)
        at.main.button[-1].click().run()  # the page's Check (the sidebar has buttons too)
        assert_clean(at)
        shown = at.success if verdict == "success" else at.error
        assert shown, name


def test_check_drafter_reasons(tiny_pair_dirs):
    pair = ModelPair.load(tiny_pair_dirs["target"], "ngram")
    assert stack.check_drafter(pair, tiny_pair_dirs["draft"]).can_draft
    mismatch = stack.check_drafter(pair, tiny_pair_dirs["other_tokenizer"])
    assert not mismatch.can_draft and "tokenizers differ" in mismatch.reason
    missing = stack.check_drafter(pair, "no/such-model-anywhere")
    assert not missing.can_draft and "no tokenizer found" in missing.reason


def test_feature_head_has_no_transformers_counterpart(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, STACK, drafter=tiny_pair_dirs["head"])
    assert_clean(at)
    assert any("EAGLE" in w.value for w in at.warning)


def _run(assisted: float, passes: int = 20) -> stack.StackRun:
    return stack.StackRun(assistant="draft", device="cpu, float32", transformers_target_only=20.0,
                          transformers_assisted=assisted,
                          specdec_target_only=20.0, specdec_speculative=25.0, same_text=True,
                          speculative=TimedRun("specdec"), assisted_tokens=40, assisted_target_passes=passes,
                          assisted_draft_passes=4 * passes)


def test_a_slower_assisted_run_is_explained_with_its_numbers():
    # 40 tokens in 20 target passes (2 per pass) at 15 tok/s against 20 alone: 0.75×, so each round
    # cost 2 / 0.75 = 2.67 plain steps.
    words = stack.assisted_words(_run(15.0))
    assert "**2.00 tokens per target pass**" in words and "4.0 passes of the draft" in words
    assert "**2.67 plain steps**" in words and "**0.75×**" in words
    assert stack.assisted_words(_run(25.0)) is None  # faster: nothing to explain
    assert stack.assisted_words(_run(15.0, passes=0)) is None  # nothing counted


def test_the_llama_cpp_command_names_no_path_of_the_server():
    command = stack.llamacpp_command(4, "./smollm2-draft/draft.gguf")
    assert "-m ./SmolLM2-135M-Instruct.Q4_1.gguf" in command and "--draft-max 4" in command
    assert not any(word.startswith("/") for word in command.split())
    assert "bundled_gguf()" in stack.TARGET_GGUF_HINT  # how a student gets the file next to it


def _snippet_arguments(code: str) -> dict:
    """The keyword arguments of the snippet's generate() call, read back as Python values."""
    import ast

    call = next(node for node in ast.walk(ast.parse(code))
                if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "generate")
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg not in ("assistant_model",
                                                                                     "pad_token_id")}


@pytest.mark.parametrize("assistant", ["./smollm2-draft", stack.PROMPT_LOOKUP])
@pytest.mark.parametrize("temperature", [0.0, 1.0, 0.7])
def test_the_snippet_writes_the_runs_own_options(temperature, assistant):
    from dataclasses import replace

    from specdec.config import SamplingConfig, Settings

    settings = replace(Settings(seed=7), sampling=SamplingConfig(temperature, 5, 0.9))
    code = stack.transformers_code("t", assistant, settings)
    written = _snippet_arguments(code)
    lookup = assistant == stack.PROMPT_LOOKUP
    config = stack.transformers_options(settings, 0)["generation_config"] if lookup \
        else stack.GenerationConfig(**stack.generate_arguments(settings), pad_token_id=0)
    assert written == {name: getattr(config, name) for name in written}  # what the run passes
    assert written["do_sample"] == (temperature > 0)
    assert ("torch.manual_seed(7)" in code) == (temperature > 0)
    if temperature > 0:
        assert written["temperature"] == temperature and written["top_k"] == 5 and written["top_p"] == 0.9


def test_the_stack_pages_snippet_follows_the_sidebars_temperature(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, STACK, temperature=0.0)
    assert "do_sample=False" in at.code[0].value and "temperature=" not in at.code[0].value
    at.session_state["temperature"] = 1.0
    at.run()
    assert_clean(at)
    assert "do_sample=True, temperature=1.0" in at.code[0].value
