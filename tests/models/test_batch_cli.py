"""bench --batch-sizes and generate --batch: the JSON fields, a row per prompt, one-line errors."""

import json

import pytest

from specdec.cli.main import main

FIELDS = {"target_only_tokens_per_second", "speculative_tokens_per_second", "ratio",
          "per_row_tokens_per_second", "pass_seconds_per_row"}


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def tiny_args(dirs):
    return ["--target-model", dirs["target"], "--draft-model", dirs["draft"]]


@pytest.mark.slow  # about a second on a 2-core machine: the whole suite runs it
def test_bench_batch_sizes_json(capsys, tiny_pair_dirs, tmp_path):
    prompt_set = tmp_path / "mini.json"
    prompt_set.write_text(json.dumps({"name": "mini", "prompts": ["def add(a, b):", "for i in", "The"]}))
    code, out, _ = run_cli(capsys, "bench", "--batch-sizes", "1,2,4,8,16", "--prompt-set", prompt_set,
                           "--json", "--no-chat", "--max-new-tokens", "6", "--temperature", "0",
                           *tiny_args(tiny_pair_dirs))
    assert code == 0
    entry = json.loads(out)["sets"]["mini"]
    assert list(entry["batch_sizes"]) == ["1", "2", "4", "8", "16"]
    for row in entry["batch_sizes"].values():
        assert set(row) == FIELDS
        assert all(value > 0 for value in row.values())
        assert row["ratio"] == pytest.approx(row["speculative_tokens_per_second"]
                                             / row["target_only_tokens_per_second"])
    assert entry["single_sequence"]["speculative_tokens_per_second"] > 0


def test_bench_batch_table(capsys, tiny_pair_dirs, tmp_path):
    prompt_set = tmp_path / "mini.json"
    prompt_set.write_text(json.dumps({"name": "mini", "prompts": ["for i in"]}))
    code, out, _ = run_cli(capsys, "bench", "--batch-sizes", "1,2", "--prompt-set", prompt_set, "--no-chat",
                           "--max-new-tokens", "4", "--drafter", "ngram",
                           "--target-model", tiny_pair_dirs["target"])
    assert code == 0 and "spec tok/s" in out and "mini" in out and "single-sequence loop" in out


@pytest.mark.parametrize("sizes", ["1,x", "0,2", "", "2,2"])
def test_bad_batch_sizes_are_one_line(capsys, sizes):
    code, out, err = run_cli(capsys, "bench", "--batch-sizes", sizes)
    assert code == 2 and err.startswith("error: batch-sizes") and len(err.strip().splitlines()) == 1


@pytest.mark.slow  # about a second on a 2-core machine: the whole suite runs it
def test_generate_batch_rows_equal_single_runs(capsys, tiny_pair_dirs, tmp_path):
    """One JSON object per prompt line (blank lines skipped); each row is what generate gives that
    prompt alone with the same seed, at T = 1 too."""
    prompts = ["def add(a, b):", "for i in range(10):", "The quick brown fox"]
    prompt_file = tmp_path / "prompts.txt"
    prompt_file.write_text(f"{prompts[0]}\n\n{prompts[1]}\n{prompts[2]}\n", encoding="utf-8")
    common = ["--json", "--max-new-tokens", "10", "--seed", "5", *tiny_args(tiny_pair_dirs)]
    code, out, _ = run_cli(capsys, "generate", "--prompt-file", prompt_file, "--batch", *common)
    assert code == 0
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["prompt"] for r in records] == [0, 1, 2]
    for record, prompt in zip(records, prompts, strict=True):
        code, alone, _ = run_cli(capsys, "generate", "--prompt", prompt, *common)
        assert record["token_ids"] == json.loads(alone)["token_ids"]
        assert sum(len(r["emitted_tokens"]) for r in record["rounds"]) == len(record["token_ids"])
        assert {"acceptance_rate", "tokens_per_pass"} <= record["metrics"].keys()


def test_generate_batch_bad_input(capsys, tiny_pair_dirs, tmp_path):
    code, _, err = run_cli(capsys, "generate", "--prompt", "hi", "--batch")
    assert code == 2 and "--prompt-file" in err
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    code, _, err = run_cli(capsys, "generate", "--prompt-file", empty, "--batch", *tiny_args(tiny_pair_dirs))
    assert code == 2 and "no non-blank line" in err
    head = ["--target-model", tiny_pair_dirs["target"], "--draft-model", tiny_pair_dirs["head"]]
    lines = tmp_path / "two.txt"
    lines.write_text("a\nb\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "generate", "--prompt-file", lines, "--batch", *head)
    assert code == 2 and "feature head" in err and len(err.strip().splitlines()) == 1


def test_generate_batch_without_speculation_is_plain_greedy_per_row(capsys, tiny_pair_dirs, tmp_path):
    prompt_file = tmp_path / "prompts.txt"
    prompt_file.write_text("def add(a, b):\nThe quick brown fox\n", encoding="utf-8")
    common = ["generate", "--prompt-file", prompt_file, "--batch", "--json", "--temperature", "0",
              "--max-new-tokens", "12", *tiny_args(tiny_pair_dirs)]
    spec = [json.loads(line) for line in run_cli(capsys, *common)[1].splitlines()]
    plain = [json.loads(line) for line in run_cli(capsys, *common, "--no-speculation")[1].splitlines()]
    assert [r["token_ids"] for r in spec] == [r["token_ids"] for r in plain]
    assert all(r["rounds"] == [] for r in plain) and all(r["rounds"] for r in spec)
