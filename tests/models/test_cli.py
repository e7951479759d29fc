"""`python -m specdec`: flags, JSON shape, and a one-line message for each bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runs import run_cli, tiny_args

from specdec.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def mini_set(folder: Path, *prompts: str) -> Path:
    """A prompt set named "mini" of these prompts, as bench's --prompt-set reads one."""
    path = folder / "mini.json"
    path.write_text(json.dumps({"name": "mini", "prompts": list(prompts)}))
    return path


def test_generate_json_shape(capsys, tiny_pair_dirs):
    code, out, _ = run_cli(capsys, "generate", "--prompt", "def add(a, b):", "--json",
                           "--max-new-tokens", "12", "--gamma", "3", "--num-samples", "2",
                           "--seed", "4", *tiny_args(tiny_pair_dirs)[:4])
    assert code == 0
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["seed"] for r in records] == [4, 5]
    for record in records:
        assert len(record["token_ids"]) == 12 and isinstance(record["text"], str)
        assert sum(len(r["emitted_tokens"]) for r in record["rounds"]) == 12
        first = record["rounds"][0]
        assert {"drafted_tokens", "num_accepted", "emitted_tokens", "draft_seconds",
                "verify_seconds", "accept_probs", "uniforms"} <= first.keys()
        assert {"acceptance_rate", "alpha", "tokens_per_pass", "tokens_per_second",
                "mean_drafted"} <= record["metrics"].keys()
    assert records[0]["token_ids"] != records[1]["token_ids"]


def test_same_seed_same_output(capsys, tiny_pair_dirs):
    argv = ["generate", "--prompt", "for i in", "--json", "--max-new-tokens", "10",
            *tiny_args(tiny_pair_dirs)]
    first = json.loads(run_cli(capsys, *argv)[1])
    second = json.loads(run_cli(capsys, *argv)[1])
    assert first["token_ids"] == second["token_ids"]


def test_greedy_no_speculation_matches_speculation(capsys, tiny_pair_dirs, tmp_path):
    prompt_file = tmp_path / "prompt.txt"
    prompt_file.write_text("The quick brown", encoding="utf-8")
    common = ["generate", "--prompt-file", prompt_file, "--json", "--temperature", "0",
              "--max-new-tokens", "15", *tiny_args(tiny_pair_dirs)]
    spec = json.loads(run_cli(capsys, *common)[1])
    plain = json.loads(run_cli(capsys, *common, "--no-speculation")[1])
    assert spec["token_ids"] == plain["token_ids"] and plain["rounds"] == []


def test_ngram_drafter_and_sampling_flags(capsys, tiny_pair_dirs):
    code, out, err = run_cli(capsys, "generate", "--prompt", "for i in range", "--drafter", "ngram",
                             "--target-model", tiny_pair_dirs["target"], "--top-k", "5",
                             "--top-p", "0.9", "--temperature", "0.7", "--max-new-tokens", "8")
    assert code == 0 and out.strip()
    assert "n-gram" in err and "tokens per target pass" in err


BAD_INPUTS = {
    "empty prompt": (["--prompt", "  "], "empty"),
    "gamma 0": (["--prompt", "x", "--gamma", "0"], "gamma must be >= 1"),
    "negative temperature": (["--prompt", "x", "--temperature", "-1"], "temperature must be >= 0"),
    "top-p 0": (["--prompt", "x", "--top-p", "0"], "top-p must be in (0, 1]"),
    "top-p above 1": (["--prompt", "x", "--top-p", "1.5"], "top-p must be in (0, 1]"),
    "infinite temperature": (["--prompt", "x", "--temperature", "inf"], "temperature must be a finite"),
    "nan temperature": (["--prompt", "x", "--temperature", "nan"], "temperature must be a finite"),
    "nan top-p": (["--prompt", "x", "--top-p", "nan"], "top-p must be a finite"),
    "negative seed": (["--prompt", "x", "--seed", "-3"], "seed must be >= 0"),
    "not a number": (["--prompt", "x", "--gamma", "two"], "invalid int value"),
    "too long": (["--prompt", "word " * 400], "exceeds the target's context"),
    "no prompt": ([], "required"),
    "missing prompt file": (["--prompt-file", "/no/such/file.txt"], "cannot read prompt file"),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_exits_nonzero_with_one_line(capsys, tiny_pair_dirs, case):
    argv, message = BAD_INPUTS[case]
    code, out, err = run_cli(capsys, "generate", *argv, "--target-model", tiny_pair_dirs["target"])
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err


def test_unknown_model_and_mismatched_pair_messages(capsys, tiny_pair_dirs):
    code, _, err = run_cli(capsys, "generate", "--prompt", "x", "--target-model", "/no/such/model")
    assert code == 2 and "could not load model '/no/such/model'" in err and err.count("\n") == 1
    code, _, err = run_cli(capsys, "generate", "--prompt", "x", "--target-model", tiny_pair_dirs["target"],
                           "--draft-model", tiny_pair_dirs["other_tokenizer"])
    assert code == 2 and "tokenizers differ" in err and err.count("\n") == 1


@pytest.mark.slow
def test_real_process_prints_no_traceback(tiny_pair_dirs):
    """The shell's view: exit status 2, one line on stderr, nothing else."""
    result = subprocess.run(
        [sys.executable, "-m", "specdec", "generate", "--prompt", "x", "--target-model",
         tiny_pair_dirs["target"], "--draft-model", tiny_pair_dirs["other_tokenizer"]],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: tokenizers differ")


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_bench_json_has_ratios(capsys, tiny_pair_dirs, tmp_path):
    prompt_set = mini_set(tmp_path, "def add(a, b):", "for i in")
    output = tmp_path / "bench.json"
    code, out, _ = run_cli(capsys, "bench", "--no-chat", "--prompt-set", prompt_set, "--json",
                           "--output", output, "--max-new-tokens", "8", "--temperature", "0",
                           *tiny_args(tiny_pair_dirs))
    assert code == 0
    report = json.loads(out)
    assert json.loads(output.read_text()) == report
    methods = report["sets"]["mini"]["methods"]
    # Every drafter with and without adaptive length, and transformers' own, against target-only.
    assert list(methods) == report["methods"] == [
        "target only", "n-gram, γ fixed", "n-gram, adaptive", "HF assisted: n-gram",
        "draft model, γ fixed", "draft model, adaptive", "HF assisted: draft model",
        "n-gram, then model, γ fixed", "n-gram, then model, adaptive"]  # transformers has no such drafter
    assert methods["target only"]["over_target_only"] == 1.0
    for label, row in methods.items():
        assert row["tokens_per_second"] > 0
        if not label.startswith(("HF", "target")):
            assert row["over_target_only"] > 0 and 0 <= row["alpha"] <= 1
            assert ("over_hf_assisted" in row) == (not label.startswith("n-gram, then"))


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_feature_head_folder_drafts_exactly_and_is_benched(capsys, tiny_pair_dirs, tmp_path):
    head = ["--target-model", tiny_pair_dirs["target"], "--draft-model", tiny_pair_dirs["head"]]
    outputs = []
    for extra in ([], ["--no-speculation"]):
        code, out, _ = run_cli(capsys, "generate", "--prompt", "def add(a, b):", "--json", "--temperature",
                               "0", "--max-new-tokens", "16", *head, *extra)
        assert code == 0
        outputs.append(json.loads(out))
    assert outputs[0]["token_ids"] == outputs[1]["token_ids"]
    assert {r["drafted_by"] for r in outputs[0]["rounds"]} == {"feature head"}
    read = [r["head_read"] for r in outputs[0]["rounds"]]
    assert read[0]["feature"] and all(r is None or r["feature"] for r in read)  # None: no room to draft
    prompt_set = mini_set(tmp_path, "for i in")
    code, out, _ = run_cli(capsys, "bench", "--no-chat", "--prompt-set", prompt_set, "--json",
                           "--max-new-tokens", "8", *head)
    assert code == 0
    assert json.loads(out)["methods"] == [  # transformers has no feature head
        "target only", "n-gram, γ fixed", "n-gram, adaptive", "HF assisted: n-gram",
        "feature head, γ fixed", "feature head, adaptive", "n-gram, then head, γ fixed",
        "n-gram, then head, adaptive"]


def test_bench_race_runs_only_the_named_drafters(capsys, tiny_pair_dirs, tmp_path):
    prompt_set = mini_set(tmp_path, "for i in")
    race = f"ngram+{tiny_pair_dirs['head']},{tiny_pair_dirs['draft']}"
    code, out, _ = run_cli(capsys, "bench", "--no-chat", "--prompt-set", prompt_set, "--json", "--race", race,
                           "--max-new-tokens", "8", "--target-model", tiny_pair_dirs["target"])
    assert code == 0
    methods = json.loads(out)["sets"]["mini"]["methods"]
    assert list(methods) == ["target only", "n-gram, then head, adaptive", "draft model, adaptive"]
    assert all(0 <= row["alpha"] <= 1 for label, row in methods.items() if label != "target only")
    code, _, err = run_cli(capsys, "bench", "--race", "ngram,ngram", "--target-model",
                           tiny_pair_dirs["target"])
    assert code == 2 and "--race" in err


def test_bench_race_lengths_run_each_drafter_at_its_own_draft_length_too(capsys, tiny_pair_dirs, tmp_path):
    prompt_set = mini_set(tmp_path, "for i in")
    code, out, _ = run_cli(capsys, "bench", "--no-chat", "--prompt-set", prompt_set, "--json", "--race",
                           tiny_pair_dirs["draft"], "--race-lengths", "1,3:0.5", "--max-new-tokens", "12",
                           "--draft-threshold", "0", "--target-model", tiny_pair_dirs["target"])
    assert code == 0
    report = json.loads(out)
    methods = report["sets"]["mini"]["methods"]
    assert list(methods) == ["target only", "draft model, adaptive", "draft model, adaptive, γ 1",
                             "draft model, adaptive, γ 3, threshold 0.5"]
    assert methods["draft model, adaptive, γ 1"]["drafted_per_round"] <= 1  # its cap, not the run's 4
    assert methods["draft model, adaptive"]["drafted_per_round"] > 1  # the run's own (threshold 0)
    assert report["default_method"] is None  # not the tiny target's default drafter (n-gram)
    names = report["method_names"]
    assert names["draft model, adaptive, γ 1"] == f"{tiny_pair_dirs['draft']}, adaptive, γ 1"
    for bad in (["--race-lengths", "3"], ["--race", "ngram", "--race-lengths", "x:0.1"],
                ["--race", "ngram", "--race-lengths", "0"], ["--race", "ngram", "--race-lengths", "3:1.5"]):
        code, _, err = run_cli(capsys, "bench", *bad, "--target-model", tiny_pair_dirs["target"])
        assert code == 2 and ("--race" in err or "gamma" in err or "threshold" in err), err


def test_bench_race_trees_run_each_drafter_with_a_tree_beside_its_chain(capsys, tiny_pair_dirs, tmp_path):
    prompt_set = mini_set(tmp_path, "for i in")
    code, out, _ = run_cli(capsys, "bench", "--no-chat", "--prompt-set", prompt_set, "--json", "--race",
                           tiny_pair_dirs["draft"], "--race-trees", "6", "--max-new-tokens", "12",
                           "--temperature", "1", "--target-model", tiny_pair_dirs["target"])
    assert code == 0
    report = json.loads(out)
    methods = report["sets"]["mini"]["methods"]
    assert list(methods) == ["target only", "draft model, adaptive", "draft model, adaptive, tree 6"]
    names = report["method_names"]
    assert names["draft model, adaptive, tree 6"] == f"{tiny_pair_dirs['draft']}, adaptive, tree 6"
    tree, chain = methods["draft model, adaptive, tree 6"], methods["draft model, adaptive"]
    assert tree["tree_rounds"] == tree["rounds"] > 0 and chain["tree_rounds"] == 0  # the run's own: chains
    for bad in (["--race-trees", "auto"], ["--race", "ngram", "--race-trees", "wide"]):
        code, _, err = run_cli(capsys, "bench", *bad, "--target-model", tiny_pair_dirs["target"])
        assert code == 2 and ("--race" in err or "tree" in err), err


def test_bench_races_priced_drafts_against_passes_counted_free(capsys, tiny_pair_dirs, tmp_path, monkeypatch):
    """Where one more token costs the target's pass 8 plain steps no draft pays: the default (priced)
    drafts nothing, while its control with passes counted free drafts; the report says the costs."""
    monkeypatch.setenv("SPECDEC_PASS_COSTS", "1,9")
    prompt_set = mini_set(tmp_path, "for i in")
    code, out, _ = run_cli(capsys, "bench", "--no-chat", "--prompt-set", prompt_set, "--json", "--race",
                           tiny_pair_dirs["draft"], "--race-lengths", "4:0.1:free", "--max-new-tokens", "12",
                           "--gamma", "4", "--target-model", tiny_pair_dirs["target"])
    assert code == 0
    report = json.loads(out)
    assert report["target_pass_costs"] == [1.0, 9.0]
    methods = report["sets"]["mini"]["methods"]
    assert methods["draft model, adaptive"]["drafted_per_round"] == 0
    assert methods["draft model, adaptive, γ 4, threshold 0.1, passes free"]["drafted_per_round"] > 0


def test_bench_table_and_bad_prompt_set(capsys, tiny_pair_dirs, tmp_path):
    prompt_set = mini_set(tmp_path, "for i in")
    code, out, _ = run_cli(capsys, "bench", "--no-chat", "--prompt-set", prompt_set, "--no-hf",
                           "--max-new-tokens", "6", "--drafter", "ngram",
                           "--target-model", tiny_pair_dirs["target"])
    assert code == 0 and "÷target" in out and "n-gram, adaptive" in out and "mini" in out
    assert "draft model" not in out  # an n-gram pair has no draft model to race
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    code, _, err = run_cli(capsys, "bench", "--prompt-set", bad, "--target-model", tiny_pair_dirs["target"])
    assert code == 2 and "cannot read prompt set" in err


def test_bench_tells_a_drafter_apart_from_the_bundled_one_of_its_kind(tiny_pair_dirs):
    from specdec.cli.bench import bench_methods
    from specdec.models.pair import LOOKUP_FIRST, NGRAM
    from specdec.paths import BUNDLED_DRAFT, BUNDLED_HEAD

    head, draft = tiny_pair_dirs["head"], tiny_pair_dirs["draft"]
    drafters = [NGRAM, head, LOOKUP_FIRST + head, draft, BUNDLED_DRAFT, BUNDLED_HEAD,
                LOOKUP_FIRST + BUNDLED_HEAD]
    labels = [m.label for m in bench_methods(drafters, with_hf=False)]
    assert len(set(labels)) == len(labels)  # results are keyed by label: none may shadow another
    name = Path(head).name
    assert {f"feature head ({name}), adaptive", f"n-gram, then head ({name}), adaptive",
            f"draft model ({Path(draft).name}), adaptive", "draft model, adaptive", "feature head, adaptive",
            "n-gram, then head, adaptive"} <= set(labels)
    alone = [m.label for m in bench_methods([NGRAM, head], with_hf=False)]  # nothing to tell apart
    assert alone[-1] == "feature head, adaptive"


def test_assisted_runs_in_bench_print_no_transformers_warning(caplog, tiny_pair_dirs):
    """transformers warns about its own assistant call once per process; bench keeps that line out."""
    from specdec.cli.bench import hf_assisted_generate
    from specdec.config import SamplingConfig, Settings
    from specdec.models.pair import ModelPair

    pair = ModelPair.load(tiny_pair_dirs["target"], tiny_pair_dirs["draft"])
    for temperature in (0, 1.0):
        tokens, _ = hf_assisted_generate(pair, [5, 6, 7], Settings(
            gamma=3, sampling=SamplingConfig(temperature=temperature), max_new_tokens=6))
        assert tokens == 6
    assert not [r for r in caplog.records if r.name.startswith("transformers")]


def test_bench_names_its_cpu_and_marks_the_default_row(capsys, tiny_pair_dirs, tmp_path, monkeypatch):
    """Speed figures differ between CPU kinds: the report says which CPU, and which row is the default."""
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")  # as when measuring for a CPU without AVX-512
    prompt_set = mini_set(tmp_path, "def add(a, b):")
    args = ["bench", "--no-chat", "--prompt-set", prompt_set, "--max-new-tokens", "4", "--temperature", "0",
            "--no-hf", "--target-model", tiny_pair_dirs["target"], "--drafter", "ngram"]
    code, out, _ = run_cli(capsys, *args, "--json")
    assert code == 0
    report = json.loads(out)
    cpu = report["cpu"]
    assert cpu["model"] and isinstance(cpu["avx512"], bool) and isinstance(cpu["amx"], bool)
    assert cpu["kernels_held_to"] == {"ATEN_CPU_CAPABILITY": "avx2"}
    # Not the bundled target, so the default drafter is n-gram lookup, with adaptive length.
    assert report["default_method"] == "n-gram, adaptive"
    assert report["method_names"]["n-gram, adaptive"] == "ngram, adaptive"
    code, out, _ = run_cli(capsys, *args)
    assert out.startswith("cpu: ") and "kernels held to ATEN_CPU_CAPABILITY=avx2" in out.splitlines()[0]
    assert any("n-gram, adaptive *" in line for line in out.splitlines())


def test_out_of_memory_in_a_command_is_one_line_with_what_to_try(monkeypatch, capsys):
    import torch

    from specdec.cli import commands

    def no_room(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(commands, "run_generate", no_room)
    assert main(["generate", "--prompt", "hi"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: out of memory on the GPU") and "the CPU" in error
    assert "Traceback" not in error


def test_bench_names_the_gpu_in_its_header_and_json_when_one_ran(capsys, tiny_pair_dirs, tmp_path):
    import torch

    from specdec.cli.bench_report import format_bench_table

    prompt_set, output = mini_set(tmp_path, "for i in"), tmp_path / "report.json"
    code, _, _ = run_cli(capsys, "bench", "--no-chat", "--prompt-set", prompt_set, "--no-hf", "--json",
                         "--max-new-tokens", "4", "--drafter", "ngram", "--output", output,
                         "--target-model", tiny_pair_dirs["target"])
    report = json.loads(output.read_text())
    assert code == 0 and ("gpu" in report) and (report["gpu"] is None) == (not torch.cuda.is_available())
    cpu_only = dict(report, gpu=None)
    assert "gpu:" not in format_bench_table(cpu_only)
    with_gpu = dict(report, gpu={"name": "NVIDIA H100 80GB HBM3", "memory_gib": 79.1, "cuda": "12.8",
                                 "torch": "2.13.0"})
    header = format_bench_table(with_gpu).splitlines()
    assert header[0].startswith("cpu: ")
    assert header[1] == "gpu: NVIDIA H100 80GB HBM3 (79.1 GiB; CUDA 12.8, torch 2.13.0)"
