"""`python -m specdec rules` and `--rule`: the JSON fields, one object per rule and temperature, and a
one-line message for each bad input."""

import json

import pytest
from test_cli import run_cli, tiny_args

from specdec.config import RULE_NAMES

FIELDS = {"rule", "lossless", "temperature", "alpha", "tokens_per_pass", "speedup", "tv", "tv_noise_floor",
          "chi2_p"}  # fmt: skip


def test_rules_json_has_exactly_the_fields_per_rule_and_temperature(capsys, tiny_pair_dirs):
    code, out, err = run_cli(capsys, "rules", "--prompt", "def add(a, b):", "--no-chat", "--samples", "6",
                             "--gamma", "2", "--top-k", "5", "--temperatures", "0,1", "--json",
                             *tiny_args(tiny_pair_dirs))  # fmt: skip
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert all(set(row) == FIELDS for row in rows)
    assert [(r["temperature"], r["rule"]) for r in rows] == [(t, n) for t in (0.0, 1.0) for n in RULE_NAMES]
    assert [r["lossless"] for r in rows[:4]] == [True, False, True, False]
    greedy = rows[:4]  # at T = 0 every rule is the greedy rule: the target's one token, every sample
    assert all(r["tv"] == 0 and r["chi2_p"] == 1 for r in greedy)


def test_rules_table(capsys, tiny_pair_dirs):
    code, out, _ = run_cli(capsys, "rules", "--prompt", "def add(a, b):", "--no-chat", "--samples", "4",
                           "--gamma", "2", *tiny_args(tiny_pair_dirs))  # fmt: skip
    assert code == 0
    assert out.splitlines()[0].split()[:3] == ["rule", "lossless", "T"]
    assert len(out.splitlines()) == 1 + len(RULE_NAMES) and "NO" in out


@pytest.mark.parametrize("argv, message", [
    (["rules", "--samples", "5"], "rules needs --prompt (or --sweep)"),
    (["rules", "--prompt", "x", "--samples", "1"], "samples must be at least 2"),
    (["rules", "--prompt", "x", "--temperatures", "1,warm"], "temperatures must be numbers"),
    (["rules", "--prompt", "x", "--temperatures", "1,-1"], "temperature must be >= 0"),
    (["rules", "--sweep", "--per-set", "0"], "per-set and new-tokens must be at least 1"),
    (["rules", "--prompt", "x", "--rule", "typical"], "unrecognized arguments: --rule"),
    (["generate", "--prompt", "x", "--rule", "argmax"], "rule must be one of speculative, top-choice"),
])  # fmt: skip
def test_bad_input_is_one_line(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_generate_with_a_lossy_rule_says_so(capsys, tiny_pair_dirs):
    code, out, err = run_cli(capsys, "generate", "--prompt", "def add(a, b):", "--rule", "top-choice",
                             "--max-new-tokens", "6", "--json", *tiny_args(tiny_pair_dirs))  # fmt: skip
    assert code == 0
    assert "the top-choice rule is lossy" in err
    assert {r["rule"] for r in json.loads(out)["rounds"]} == {"top-choice"}
