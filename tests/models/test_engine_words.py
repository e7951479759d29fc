"""The engines' metric lines, against numbers worked out by hand for three rounds:
a bonus round (3 drafted, 3 kept, + bonus), a rejected round (3 drafted, 1 kept, + correction) and a
round with no drafts (an n-gram miss: the target alone adds 1 token)."""

import pytest

from specdec.cli.main import main
from specdec.core.records import RoundTrace
from specdec.views.engine_words import (
    engine_counts,
    engine_summary,
    llamacpp_lines,
    sglang_line,
    translations,
    trap_questions,
    vllm_line,
)


def _round(index: int, drafted: list[int], accepted: int, bonus: bool) -> RoundTrace:
    emitted = drafted[:accepted] + [99]
    k = len(drafted)
    return RoundTrace(index=index, context_length=10, drafted_tokens=drafted, positions=[],
                      draft_token_probs=[0.5] * k, target_token_probs=[0.5] * k, accept_probs=[1.0] * k,
                      uniforms=[0.0] * k, num_accepted=accepted, next_token=99, is_bonus=bonus,
                      emitted_tokens=emitted, draft_seconds=0.0, verify_seconds=0.0)


TRACES = [_round(0, [1, 2, 3], 3, True), _round(1, [4, 5, 6], 1, False), _round(2, [], 0, False)]
SECONDS = 2.0


def test_counts_by_hand():
    c = engine_counts(TRACES, SECONDS)
    assert (c.passes, c.drafts, c.drafts_with_an_accept) == (3, 2, 2)
    assert (c.drafted, c.accepted, c.tested, c.emitted) == (6, 4, 5, 7)  # tested: 3 + (1 kept + 1 rejected)
    assert c.accepted_at == [2, 1, 1]
    assert c.alpha == pytest.approx(4 / 5)
    assert c.acceptance_rate == pytest.approx(4 / 6)
    assert c.mean_acceptance_length == pytest.approx(1 + 4 / 2)
    assert c.per_position == pytest.approx([1.0, 0.5, 0.5])
    assert c.tokens_per_pass == pytest.approx(7 / 3)


def test_vllm_line_by_hand():
    assert vllm_line(engine_counts(TRACES, SECONDS)) == (
        "SpecDecoding metrics: Mean acceptance length: 3.00, Accepted throughput: 2.00 tokens/s, "
        "Drafted throughput: 3.00 tokens/s, Accepted: 4 tokens, Drafted: 6 tokens, "
        "Per-position acceptance rate: 1.000, 0.500, 0.500, Avg Draft acceptance rate: 66.7%"
    )


def test_llamacpp_lines_by_hand():
    assert llamacpp_lines(engine_counts(TRACES, SECONDS)) == (
        "draft acceptance rate = 0.66667 (    4 accepted /     6 generated)\n"
        "statistics draft: #calls(b,g,a) = 1 3 3, #gen drafts = 2, #acc drafts = 2, #gen tokens = 6, "
        "#acc tokens = 4"
    )


def test_sglang_line_by_hand():
    assert sglang_line(engine_counts(TRACES, SECONDS)) == (
        "Decode batch. #running-req: 1, accept len: 2.33, gen throughput (token/s): 3.50"
    )


def test_translations_name_the_traps_with_this_runs_numbers():
    rows = {(t.engine, t.figure): t for t in translations(engine_counts(TRACES, SECONDS))}
    assert "not α" in rows[("vLLM", "Avg Draft acceptance rate")].here
    assert "4 / 5 = 0.800" in rows[("vLLM", "Avg Draft acceptance rate")].here
    assert rows[("SGLang", "accept len")].value == "2.33"


def test_trap_questions_are_answered_by_the_run():
    first, second = trap_questions(engine_counts(TRACES, SECONDS))
    assert first.options[first.answer] == "0.800" and "66.7%" in first.question
    assert second.options[second.answer] == "2.00" and "3.00" in second.question
    assert len(set(first.options)) == 3 and len(set(second.options)) == 3


def test_an_empty_run_prints_zeros_not_an_error():
    for style in ("vllm", "llamacpp", "sglang"):
        assert engine_summary(style, [], 0.0)


def test_cli_metrics_style(capsys, tiny_pair_dirs):
    code = main(["generate", "--prompt", "def add(a, b):", "--max-new-tokens", "8", "--temperature", "0",
                 "--target-model", tiny_pair_dirs["target"], "--draft-model", tiny_pair_dirs["draft"],
                 "--metrics-style", "vllm"])
    err = capsys.readouterr().err
    assert code == 0 and "SpecDecoding metrics: Mean acceptance length:" in err
    assert main(["generate", "--prompt", "x", "--metrics-style", "tgi"]) == 2
    assert "invalid choice" in capsys.readouterr().err
