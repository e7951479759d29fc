"""`python -m specdec rules` and `--rule`: the JSON fields, one object per rule and temperature, and a
one-line message for each bad input."""

import json

import pytest
from cli_runs import run_cli, tiny_args

from specdec.config import RULE_NAMES

FIELDS = {"rule", "lossless", "temperature", "alpha", "tokens_per_pass", "speedup", "tv", "tv_noise_floor",
          "chi2_p", "tv_exact", "acceptance_exact", "position", "context"}


def test_rules_json_has_exactly_the_fields_per_rule_and_temperature(capsys, tiny_pair_dirs):
    code, out, err = run_cli(capsys, "rules", "--prompt", "def add(a, b):", "--no-chat", "--samples", "6",
                             "--gamma", "2", "--top-k", "5", "--temperatures", "0,1", "--json",
                             *tiny_args(tiny_pair_dirs))
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert all(set(row) == FIELDS for row in rows)
    assert [(r["temperature"], r["rule"]) for r in rows] == [(t, n) for t in (0.0, 1.0) for n in RULE_NAMES]
    assert [r["lossless"] for r in rows[:4]] == [True, False, True, False]
    greedy = rows[:4]  # at T = 0 every rule is the greedy rule: the target's one token, every sample
    assert all(r["tv"] == 0 and r["chi2_p"] == 1 for r in greedy)


def test_rules_table(capsys, tiny_pair_dirs):
    code, out, _ = run_cli(capsys, "rules", "--prompt", "def add(a, b):", "--no-chat", "--samples", "4",
                           "--gamma", "2", *tiny_args(tiny_pair_dirs))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("T = 1, position 0 of a target sample (seed 0)")  # where the trial ran
    assert lines[1].split()[:3] == ["rule", "lossless", "T"] and lines[1].split()[-4:] == ["TV", "exact",
                                                                                         "acc", "exact"]
    assert len(lines) == 2 + len(RULE_NAMES) and "NO" in out


@pytest.mark.parametrize("argv, message", [
    (["rules", "--samples", "5"], "rules needs --prompt (or --sweep)"),
    (["rules", "--prompt", "x", "--samples", "1"], "samples must be at least 2"),
    (["rules", "--prompt", "x", "--temperatures", "1,warm"], "temperatures must be numbers"),
    (["rules", "--prompt", "x", "--temperatures", "1,-1"], "temperature must be >= 0"),
    (["rules", "--sweep", "--per-set", "0"], "per-set and new-tokens must be at least 1"),
    (["rules", "--prompt", "x", "--rule", "typical"], "unrecognized arguments: --rule"),
    (["generate", "--prompt", "x", "--rule", "argmax"], "rule must be one of speculative, top-choice"),
    (["rules", "--prompt", "x", "--accept", "__import__('os')"], "'__import__' cannot be called"),
    (["rules", "--prompt", "x", "--accept", "p.real"], "an attribute (.) is not allowed"),
    (["rules", "--prompt", "x", "--accept", "9**9**9"], "as its exponent"),
    (["rules", "--prompt", "x", "--accept", "p > q", "--on-reject", "argmax"], "on-reject must be one of"),
    (["rules", "--prompt", "x", "--accept", "p > q", "--tokens", "2"], "first token only"),
    (["rules", "--prompt", "x", "--position", "-1"], "position must be auto or a token number"),
    (["rules", "--prompt", "x", "--position", "soon"], "position must be auto or a token number"),
])
def test_bad_input_is_one_line(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_generate_with_a_lossy_rule_says_so(capsys, tiny_pair_dirs):
    code, out, err = run_cli(capsys, "generate", "--prompt", "def add(a, b):", "--rule", "top-choice",
                             "--max-new-tokens", "6", "--json", *tiny_args(tiny_pair_dirs))
    assert code == 0
    assert "the top-choice rule is lossy" in err
    assert {r["rule"] for r in json.loads(out)["rounds"]} == {"top-choice"}


def test_rules_with_your_own_rule_at_a_position(capsys, tiny_pair_dirs):
    code, out, err = run_cli(capsys, "rules", "--prompt", "def add(a, b):", "--no-chat", "--samples", "6",
                             "--gamma", "2", "--top-k", "5", "--position", "2", "--accept", "p > q", "--json",
                             *tiny_args(tiny_pair_dirs))
    assert code == 0, err
    rows = {row["rule"]: row for row in map(json.loads, out.splitlines())}
    assert set(rows) == {*RULE_NAMES, "yours"}
    assert {(r["position"], r["context"] != "") for r in rows.values()} == {(2, True)}
    assert rows["speculative"]["tv_exact"] < 1e-9 and rows["speculative"]["lossless"]
    assert not rows["yours"]["lossless"] and 0 <= rows["yours"]["acceptance_exact"] <= 1


@pytest.mark.slow  # about a second on a 2-core machine: the whole suite runs it
def test_rules_position_auto_is_where_the_top_choice_loses_most(capsys, tiny_pair_dirs):
    from specdec.measure.exact import SCAN_TOKENS

    code, out, err = run_cli(capsys, "rules", "--prompt", "def add(a, b):", "--no-chat", "--samples", "4",
                             "--gamma", "2", "--top-k", "5", "--position", "auto", "--json",
                             *tiny_args(tiny_pair_dirs))
    assert code == 0, err
    rows = {row["rule"]: row for row in map(json.loads, out.splitlines())}
    chosen = rows["top-choice"]["position"]
    assert 0 <= chosen < SCAN_TOKENS
    # Asked for that position by number, the top choice's exact TV is the same, and no other one of the
    # positions scanned is larger.
    best = rows["top-choice"]["tv_exact"]
    for position in sorted({0, chosen, max(chosen - 1, 0)}):
        code, out, _ = run_cli(capsys, "rules", "--prompt", "def add(a, b):", "--no-chat", "--samples", "2",
                               "--gamma", "2", "--top-k", "5", "--position", str(position), "--json",
                               *tiny_args(tiny_pair_dirs))
        there = {row["rule"]: row for row in map(json.loads, out.splitlines())}["top-choice"]["tv_exact"]
        assert there <= best + 1e-6 and (position != chosen or abs(there - best) < 1e-6)
