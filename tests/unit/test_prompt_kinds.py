"""Code vs prose's words: kinds as a reader names them, and a quiz whose feedback answers its question."""

import pytest

from specdec.views import prompt_kinds


def _kind(category: str, acceptance: float, speedup: float) -> dict:
    return {"category": category, "acceptance_rate": acceptance, "tokens_per_pass": 1 + 2 * acceptance,
            "speedup": speedup}


# The most and least accepted kinds are neither code nor prose: the feedback must still speak of those two.
SUMMARY = [_kind("code", 0.60, 1.40), _kind("prose", 0.40, 1.10), _kind("structured", 0.20, 0.90),
           _kind("copy-heavy", 0.90, 2.10)]


def test_kinds_are_written_as_words():
    assert prompt_kinds.kind_words("copy_heavy") == "copy-heavy"
    assert prompt_kinds.kind_words("code") == "code"


@pytest.mark.parametrize("answer", list(prompt_kinds.CHOICES))
def test_the_feedback_speaks_of_the_kinds_the_question_asks_about(answer):
    question = prompt_kinds.quiz_question(SUMMARY)
    assert "code ran at 1.40×" in question and "prose at 1.10×" in question
    right, words = prompt_kinds.quiz_feedback(SUMMARY, answer, per_category=2)
    assert right == (answer == prompt_kinds.RIGHT)
    assert "**code** kept 60%" in words and "**prose** kept 40%" in words
    assert "copy-heavy" not in words and "structured" not in words
    assert "This run does not show it" not in words  # code did keep more than prose


@pytest.mark.parametrize("answer", list(prompt_kinds.CHOICES))
def test_the_feedback_never_says_the_context_was_held_the_same(answer):
    _, words = prompt_kinds.quiz_feedback(SUMMARY, answer, per_category=2)
    assert f"with {prompt_kinds.HELD}" in words  # what was: temperature, γ and the token budget
    assert "context" not in prompt_kinds.HELD and "answer" not in prompt_kinds.HELD
    assert "context and output length were held the same" not in words.lower()
    if answer == "context":
        assert "Context length was not held the same" in words


def test_a_run_that_does_not_show_the_pattern_says_so():
    flipped = [_kind("code", 0.30, 0.95), _kind("prose", 0.50, 1.20)]
    assert "no gap this run" in prompt_kinds.quiz_question(flipped)
    _, words = prompt_kinds.quiz_feedback(flipped, prompt_kinds.RIGHT, per_category=1)
    assert "This run does not show it for code and prose (1 prompt(s) a kind is few)" in words


def test_without_code_and_prose_the_quiz_compares_the_fastest_and_slowest():
    others = [_kind("structured", 0.20, 0.90), _kind("copy-heavy", 0.90, 2.10)]
    assert "Here copy-heavy ran at 2.10× and structured at 0.90×" in prompt_kinds.quiz_question(others)
    _, words = prompt_kinds.quiz_feedback(others, "length", per_category=1)
    assert "**copy-heavy** kept 90%" in words and "**structured** kept 20%" in words


def test_every_prompts_table_is_in_words_and_few_digits():
    run = {"category": "copy_heavy", "prompt": 1, "text": "Repeat this", "acceptance_rate": 0.4712,
           "tokens_per_pass": 2.0, "drafted_per_round": 3.1234, "speculative_tokens_per_second": 13.4,
           "target_tokens_per_second": 8.41234, "speedup": 1.59312, "alpha": 0.47}
    row = prompt_kinds.prompt_rows([run])[0]
    assert row == {"kind": "copy-heavy", "prompt": 1, "acceptance": "47%", "tokens / pass": "2.00",
                   "drafts a round": "3.1", "speculative tokens/s": "13.4", "target alone tokens/s": "8.41",
                   "speed-up": "1.59×", "text": "Repeat this"}
    assert not any("_" in key for key in row)
    checked = ("category", "prompt", "acceptance_rate", "tokens_per_pass", "speedup")  # what a file must hold
    reloaded = {key: run[key] for key in checked}
    assert prompt_kinds.prompt_rows([reloaded])[0]["speculative tokens/s"] == "–"
