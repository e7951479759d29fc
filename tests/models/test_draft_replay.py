"""experiments/draft_replay.py: the target's greedy answers replayed round by round under a draft-length rule,
priced in plain steps. Synthetic answers check the arithmetic; the bundled pair checks the replay
against the engine's own rounds."""

import argparse
import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from specdec.config import SamplingConfig, Settings
from specdec.models.runs import generate
from specdec.paths import HELD_OUT_PROMPT_SETS

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "draft_replay.py"
spec = importlib.util.spec_from_file_location("draft_replay", SCRIPT)
replay_script = importlib.util.module_from_spec(spec)
sys.modules["draft_replay"] = replay_script  # its dataclass looks itself up there
spec.loader.exec_module(replay_script)

AVX2 = replay_script.PASS_COSTS["AVX2 kernels"]
UNCALIBRATED = [0.0] * 10


def synthetic_answer(length: int, right: bool, q: float) -> "replay_script.Answer":
    """An answer of distinct tokens (so the n-gram lookup never matches) whose draft is always right or
    always wrong, with top probability q everywhere."""
    prompt, answer = [1000, 1001, 1002], list(range(2000, 2000 + length))
    tops = answer if right else [token + 1 for token in answer]
    return replay_script.Answer("code", prompt + answer, len(prompt), tops, [q] * length, [0.0] * length,
                                [0.0] * length)


def test_a_sure_right_draft_drafts_up_to_the_cap_every_round():
    answer = synthetic_answer(28, right=True, q=0.99)
    tokens, cost, rounds = replay_script.replay(answer, "default", AVX2, 0.1, UNCALIBRATED, 64)
    assert tokens == 28
    assert rounds == [(6, 6)] * 4  # 4 rounds of 6 drafts kept + the target's token
    assert cost == pytest.approx(4 * (AVX2[6] + 0.1 * 6))  # a k-th draft is not fed to the draft


def test_a_longer_draft_length_drafts_longer_rounds():
    answer = synthetic_answer(27, right=True, q=0.99)
    _, _, rounds = replay_script.replay(answer, "default", AVX2, 0.1, UNCALIBRATED, 64, gamma=8)
    assert rounds == [(8, 8)] * 3
    assert replay_script.parse_lengths("8:0.1,4:0.05") == [(8, 0.1), (4, 0.05)]
    with pytest.raises(argparse.ArgumentTypeError):
        replay_script.parse_lengths("8")


def test_an_unsure_draft_is_refused_and_each_refusal_costs_one_draft_call():
    answer = synthetic_answer(10, right=True, q=0.3)
    tokens, cost, rounds = replay_script.replay(answer, "default", AVX2, 0.1, UNCALIBRATED, 64)
    assert rounds == [(0, 0)] * 10
    assert cost == pytest.approx(10 * (1 + 0.1))
    # Resting after a refusal skips the draft's call every other round.
    _, rested_cost, _ = replay_script.replay(answer, "rest", AVX2, 0.1, UNCALIBRATED, 64)
    assert rested_cost == pytest.approx(10 + 5 * 0.1)


def test_the_oracle_never_drafts_a_wrong_token_while_the_default_pays_for_sure_wrong_drafts():
    answer = synthetic_answer(20, right=False, q=0.99)
    tokens, default_cost, rounds = replay_script.replay(answer, "default", AVX2, 0.1, UNCALIBRATED, 64)
    assert all(drafted > 0 and kept == 0 for drafted, kept in rounds)
    assert tokens / default_cost < 1  # the negative control: sure and wrong is slower than the target
    _, oracle_cost, oracle_rounds = replay_script.replay(answer, "oracle", AVX2, 0.1, UNCALIBRATED, 64)
    assert oracle_rounds == [(0, 0)] * 20 and oracle_cost == pytest.approx(20)


def test_calibration_lifts_an_underconfident_first_draft_over_its_price():
    answer = synthetic_answer(12, right=True, q=0.35)  # refused: a first draft must beat ~0.46 here
    calibrated = replay_script.calibration_table([answer])
    assert calibrated[3] == 1.0  # every draft at q 0.3-0.4 was kept
    _, _, rounds = replay_script.replay(answer, "default", AVX2, 0.1, calibrated, 64)
    assert all(drafted == 0 for drafted, _ in rounds)
    _, _, first = replay_script.replay(answer, "calibrated-first", AVX2, 0.1, calibrated, 64)
    assert first[0][0] >= 1


def test_auc_ranks_kept_above_rejected():
    labels = torch.tensor([0.0, 0.0, 1.0, 1.0])
    assert replay_script.auc(torch.tensor([0.1, 0.2, 0.8, 0.9]), labels) == 1.0
    assert replay_script.auc(torch.tensor([0.9, 0.8, 0.2, 0.1]), labels) == 0.0


def rounds_by_start(rounds: list[tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """(drafted, kept) per round, keyed by the answer position the round starts at."""
    starts, made = {}, 0
    for drafted, kept in rounds:
        starts[made] = (drafted, kept)
        made += kept + 1
    return starts


def test_rounds_are_keyed_by_where_they_start():
    assert rounds_by_start([(2, 2), (1, 0), (3, 1)]) == {0: (2, 2), 3: (1, 0), 4: (3, 1)}


@pytest.mark.slow
def test_the_replay_of_the_default_rule_follows_the_engine(bundled_pair, monkeypatch):
    """Same answers, same pass costs: the replay's rounds are the engine's, up to the draft's numbers
    (int8 or bf16 weights round differently in a pass over two tokens, as the engine feeds some, than
    over one) and what a doomed round drafts after its first wrong draft (the module's docstring).
    Rounds are compared where they start at the same answer position: one near tie that flips a draft
    shifts every later round.

    Both price drafts by one fixed profile (SPECDEC_PASS_COSTS, read by a copy of the loaded target),
    not by the costs timed when the pair loaded: those move with the machine's load, and so does how
    many near ties the first prose answer meets (11 to 18 of its 20 rounds alike)."""
    monkeypatch.setenv("SPECDEC_PASS_COSTS", ",".join(map(str, AVX2)))
    bundled_pair = dataclasses.replace(bundled_pair, target=dataclasses.replace(bundled_pair.target))
    assert bundled_pair.target.pass_costs == AVX2  # the copy times nothing: it reads the fixed profile
    prompts = [("code", json.loads(HELD_OUT_PROMPT_SETS["code"].read_text())["prompts"][0]),
               ("prose", json.loads(HELD_OUT_PROMPT_SETS["prose"].read_text())["prompts"][0])]
    answers = replay_script.record(bundled_pair, prompts, 48)
    # The replay replays chains, as the engine drafts them by default.
    settings = Settings(sampling=SamplingConfig(temperature=0.0), max_new_tokens=48)
    for answer in answers:
        traces = generate(bundled_pair, answer.token_ids[: answer.start], settings, detail=False).rounds
        _, _, rounds = replay_script.replay(answer, "default", AVX2, 0.1, UNCALIBRATED, 48)
        assert abs(len(rounds) - len(traces)) <= max(2, len(traces) // 10)
        engine = rounds_by_start([(t.num_drafted, t.num_accepted) for t in traces])
        replayed = rounds_by_start(rounds)
        same = sum(replayed.get(start) == round_ for start, round_ in engine.items())
        assert same >= 0.6 * len(engine)
