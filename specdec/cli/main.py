"""`python -m specdec generate|bench|...`: the engine from a terminal. Bad input -> one line, exit 2."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from specdec.cli.arguments import add_config_arguments, add_settings_arguments
from specdec.cli.classroom import add_class_parser, run_class
from specdec.config import CAMPAIGN_GOAL, DraftTrainingConfig, ExitTrainingConfig, HeadTrainingConfig
from specdec.errors import SpecDecError, is_out_of_memory, out_of_memory_message
from specdec.model_names import check_drafter_name, check_pair_names
from specdec.paths import ASSETS, BUNDLED_DRAFT, BUNDLED_TARGET, CAMPAIGN_ANSWERS, GREEDY_CAMPAIGN_ANSWERS

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (no usage dump) like every other bad input."""

    def error(self, message: str) -> None:
        raise SpecDecError(message)


def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target-model", default=BUNDLED_TARGET,
                        help=f"bundled name, Hugging Face id or local folder (default {BUNDLED_TARGET})")
    drafter = parser.add_mutually_exclusive_group()
    drafter.add_argument("--draft-model", help="draft model (bundled name, Hugging Face id, folder, or "
                         "train-draft's output folder), feature head (bundled name or folder) or early exit "
                         "(early:L, or an exit adapter's bundled name or folder); 'ngram+' before it: "
                         "n-gram lookup first")
    drafter.add_argument("--drafter", choices=["ngram"], help="a drafter without a model")
    parser.add_argument("--retime", action="store_true", help="time this machine's matrix layouts, "
                        "precisions and pass costs afresh, replacing the figures kept in the cache")


def _add_run_arguments(parser: argparse.ArgumentParser, chat_default: bool, exclude: tuple = ()) -> None:
    add_settings_arguments(parser, exclude)
    parser.add_argument("--chat", action=argparse.BooleanOptionalAction, default=chat_default,
                        help="wrap the prompt in the target's chat template")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m specdec", description="Speculative decoding, step by step.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    generate = commands.add_parser("generate", help="generate text, speculatively or not")
    prompt = generate.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt")
    prompt.add_argument("--prompt-file", type=Path)
    _add_model_arguments(generate)
    _add_run_arguments(generate, chat_default=False)
    generate.add_argument("--num-samples", type=int, default=1,
                          help="independent samples, seeds seed, seed+1, ...")
    generate.add_argument("--no-speculation", action="store_true", help="target-only decoding")
    generate.add_argument("--batch", action="store_true",
                          help="with --prompt-file: one prompt per line, all decoded together as one batch")
    generate.add_argument("--metrics-style", choices=["vllm", "llamacpp", "sglang"],
                          help="also print the run's summary as that engine logs it")

    bench = commands.add_parser("bench", help="speculative vs target-only vs Hugging Face, side by side")
    _add_model_arguments(bench)
    _add_run_arguments(bench, chat_default=True, exclude=("rule",))  # bench measures the engine's own rule
    bench.add_argument("--prompt-set", action="append", type=Path,
                       help="a JSON prompt set (default: every held-out set in assets/prompts)")
    bench.add_argument("--repeats", type=int, default=1, help="runs per prompt and method")
    bench.add_argument("--no-hf", action="store_true", help="skip Hugging Face assisted generation")
    bench.add_argument("--race", help="only these drafters (names as --draft-model takes, separated by "
                       "commas), each at one draft length (adaptive unless --no-adaptive), against the "
                       "target alone")
    bench.add_argument("--race-lengths", help="with --race: each drafter also at these draft lengths, "
                       "as γ or γ:draft-threshold separated by commas (e.g. 3:0.1,5); γ:threshold:free "
                       "prices drafts as if short passes cost nothing (--no-price-drafts)")
    bench.add_argument("--race-trees", help="with --race: each drafter also with these trees of drafts, as "
                       "--tree takes them separated by commas (e.g. auto,8): a tree raced beside its chain")
    bench.add_argument("--output", type=Path, help="with --json: write the results to this file")
    bench.add_argument("--batch-sizes", help="instead: decode each set in batches of these sizes (e.g. "
                       "1,2,4,8,16), target-only and speculative with the same drafter (default set: code)")
    rules = commands.add_parser("rules", help="the four acceptance rules sampled side by side on one prompt")
    rules.add_argument("--prompt", help="the prompt the rules are tried on (not with --sweep)")
    _add_model_arguments(rules)
    _add_run_arguments(rules, chat_default=True, exclude=("rule", "max_new_tokens"))
    rules.add_argument("--samples", type=int, default=150,
                       help="short samples of each rule and of each target-only half (default 150)")
    rules.add_argument("--tokens", type=int, default=1, help="first tokens compared per sample, 1 to 4")
    rules.add_argument("--temperatures", help="comma-separated, e.g. 0,0.5,1: one trial each "
                       "(default: --temperature alone; with --sweep: 0,0.3,0.6,1,1.5)")
    rules.add_argument("--sweep", action="store_true", help="instead: the exact rule on the held-out code "
                       "and prose prompt sets at each temperature, one row per set and temperature")
    rules.add_argument("--per-set", type=int, default=6, help="with --sweep: prompts per set (default all 6)")
    rules.add_argument("--new-tokens", type=int, default=48,
                       help="with --sweep: tokens per prompt (default 48)")
    rules.add_argument("--position", help="where the trial runs: N = the N-th token of a target sample of "
                       "the prompt (seeded with --seed; default 0, the prompt's own next token), or auto = "
                       "where the top-choice rule's exact TV (with --accept: your rule's) is largest, "
                       "among the sample's first 48 tokens")
    rules.add_argument("--accept", help="your own rule too: the probability of keeping a draft x as an "
                       "expression in p and q (x's probabilities under the target and the draft), e.g. "
                       "'min(1, p/q)', 'p > q', 'p/(p+q)'; also pmax and H (the target's top probability and "
                       "entropy), min, max, sqrt, exp, log, abs; clamped to [0, 1]")
    rules.add_argument("--on-reject", default="residual", help="with --accept: what replaces a rejected "
                       "draft: residual (norm(max(0, p - q))), target (a draw from p), draft (a draw from "
                       "q), target-other (a draw from p other than x), typical (p cut to its typical "
                       "tokens); default residual")

    train = commands.add_parser("train-draft", help="distil a draft model from the bundled target")
    train.add_argument("--work-dir", type=Path, default=Path(".cache/draft-training"),
                       help="data shards, evaluation set and checkpoints (resumable)")
    train.add_argument("--output", type=Path, help="where the trained draft's layers go (default: "
                       "WORK_DIR/draft; the shipped draft, assets/draft, only when named here)")
    add_config_arguments(train, DraftTrainingConfig)

    head = commands.add_parser("train-head", help="train a feature head (EAGLE-style) for the bundled target")
    head.add_argument("--work-dir", type=Path, default=Path(".cache/head-training"),
                      help="data shards, features, evaluation set and checkpoints (resumable)")
    head.add_argument("--output", type=Path, help="where the trained head goes (default: WORK_DIR/head; the "
                      "shipped head, assets/feature_head, only when named here)")
    add_config_arguments(head, HeadTrainingConfig)

    exit_adapter = commands.add_parser("train-exit", help="train an exit adapter (Kangaroo-style) after the "
                                       "bundled target's first layers; resumable")
    exit_adapter.add_argument("--work-dir", type=Path, default=Path(".cache/exit-training"),
                              help="checkpoints, one per exit layer (resumable)")
    exit_adapter.add_argument("--output", type=Path, default=Path(".cache/exit-training/exit"),
                              help="where the adapter goes (assets/exit_adapter is the shipped one)")
    add_config_arguments(exit_adapter, ExitTrainingConfig)

    campaign = commands.add_parser("campaign", help="the target answers many prompts of many kinds (training "
                                   "data for the feature head, with its features); resumable")
    campaign.add_argument("--answers", type=int, default=CAMPAIGN_GOAL,
                          help=f"answers to reach in all (default {CAMPAIGN_GOAL})")
    campaign.add_argument("--minutes", type=float, help="stop after the shard under way when this much time "
                          "has passed (run it again to go on)")
    campaign.add_argument("--batch", type=int, default=64, help="answers sampled together: one shard (64)")
    campaign.add_argument("--max-new-tokens", type=int, default=160, help="answer length cap (160)")
    campaign.add_argument("--greedy", action="store_true", help="the target's greedy answers (the text T = 0 "
                          "drafting meets) to the same prompts, in their own folders")
    campaign.add_argument("--answers-dir", type=Path, help="the answers' token ids (small: kept with the "
                          f"project; default {CAMPAIGN_ANSWERS.relative_to(ASSETS.parent)}, with --greedy "
                          f"{GREEDY_CAMPAIGN_ANSWERS.relative_to(ASSETS.parent)})")
    campaign.add_argument("--features-dir", type=Path, help="the target's features (large; default: "
                          "campaign-features, with --greedy campaign-greedy-features, in the specdec cache: "
                          "~/.cache/specdec or $SPECDEC_CACHE)")

    export = commands.add_parser("export-draft", help="the shipped draft as a standard transformers "
                                 "folder (and a GGUF file for llama.cpp)")
    export.add_argument("out", type=Path, help="a new or empty folder")
    export.add_argument("--gguf", action="store_true", help="also write an F32 GGUF with llama.cpp's names")

    figures = commands.add_parser("eval-draft", help="a draft's cost ratio and match on held-out prompts")
    figures.add_argument("--target-model", default=BUNDLED_TARGET)
    figures.add_argument("--draft-model", default=BUNDLED_DRAFT)
    add_config_arguments(figures, DraftTrainingConfig, only=("eval_tokens",))
    figures.add_argument("--sampled", action="store_true", help="along the target's answers sampled at T = 1 "
                         "(seeded), the text T = 1 drafting meets, not its greedy answers")
    figures.add_argument("--json", action="store_true")
    add_class_parser(commands)
    return parser


def _read_prompt(args: argparse.Namespace) -> str:
    if args.prompt_file is None:
        return args.prompt
    try:
        return args.prompt_file.read_text(encoding="utf-8")
    except OSError as error:
        raise SpecDecError(f"cannot read prompt file '{args.prompt_file}': {error.strerror}") from error


def _read_prompt_lines(args: argparse.Namespace) -> list[str]:
    """--batch: one prompt per non-blank line of --prompt-file."""
    if args.prompt_file is None:
        raise SpecDecError("--batch reads one prompt per line of --prompt-file: give --prompt-file")
    prompts = [line for line in _read_prompt(args).splitlines() if line.strip()]
    if not prompts:
        raise SpecDecError(f"prompt file '{args.prompt_file}' has no non-blank line to decode")
    return prompts


def check_names(args: argparse.Namespace) -> None:
    """Every model name the command will load, checked before torch is imported (model_names)."""
    if not hasattr(args, "target_model"):
        return
    check_pair_names(args.target_model, getattr(args, "draft_model", None) or getattr(args, "drafter", None))
    for name in (getattr(args, "race", None) or "").split(","):
        if name.strip():
            check_drafter_name(name.strip())


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        check_names(args)
        if args.command == "class":  # no models, no torch
            run_class(args)
            return 0
        if getattr(args, "retime", False):
            os.environ["SPECDEC_RETIME"] = "1"  # kernels.kept_timings: time afresh, replace what is kept
        # Imported here so `--help`, argument errors and bad names answer without loading torch.
        started = time.perf_counter()
        from specdec.cli import commands

        args.imports_seconds = time.perf_counter() - started

        if args.command == "generate" and args.batch:
            commands.run_generate_batch(args, _read_prompt_lines(args))
        elif args.command == "generate":
            commands.run_generate(args, _read_prompt(args))
        elif args.command == "bench":
            commands.run_bench(args)
        elif args.command == "export-draft":
            commands.run_export_draft(args)
        elif args.command == "rules":
            commands.run_rules(args)
        elif args.command == "train-draft":
            commands.run_train_draft(args)
        elif args.command == "train-head":
            commands.run_train_head(args)
        elif args.command == "train-exit":
            commands.run_train_exit(args)
        elif args.command == "campaign":
            commands.run_campaign(args)
        else:
            commands.run_eval_draft(args)
        return 0
    except SpecDecError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (MemoryError, RuntimeError) as error:  # torch.OutOfMemoryError is a RuntimeError
        if not is_out_of_memory(error):
            raise
        print(f"error: {out_of_memory_message(error)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130

