"""What the CLI's commands do, once their arguments are parsed."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

import torch
from tqdm import tqdm

from specdec.cli.arguments import config_from_args, settings_from_args
from specdec.cli.bench import (
    load_prompt_sets,
    parse_batch_sizes,
    parse_race,
    parse_race_lengths,
    parse_race_trees,
    run_batch_bench,
    run_bench_sets,
)
from specdec.cli.bench_report import format_batch_table, format_bench_table
from specdec.clock import now
from specdec.config import LOSSY_RULES, DraftTrainingConfig, ExitTrainingConfig, HeadTrainingConfig
from specdec.errors import SpecDecError
from specdec.models.pair import ModelPair
from specdec.models.runs import generate
from specdec.models.startup import StartupSplit, first_token_seconds, load_timed
from specdec.paths import BUNDLED_TARGET, HELD_OUT_PROMPT_SETS
from specdec.views.engine_words import engine_summary


def load_pair(args: argparse.Namespace) -> ModelPair:
    return load_pair_timed(args)[0]


def load_pair_timed(args: argparse.Namespace) -> tuple[ModelPair, StartupSplit]:
    """The pair, and where the start went (the imports as main.py timed them)."""
    drafter = args.draft_model or args.drafter
    return load_timed(args.target_model, drafter, getattr(args, "imports_seconds", None))


def describe_pair(pair: ModelPair) -> None:
    print(f"target: {pair.target.describe()}", file=sys.stderr)
    print(f"drafter: {pair.draft.describe() if pair.draft else 'n-gram prompt lookup'}", file=sys.stderr)


def _summary_line(metrics: dict, speculative: bool) -> str:
    speed = f"{metrics['tokens_emitted']} tokens, {metrics['tokens_per_second']:.1f} tokens/s"
    if not speculative:
        return f"[target only: {speed}]"
    return (
        f"[{speed}, {metrics['rounds']} rounds, acceptance {metrics['acceptance_rate']:.2f}, "
        f"alpha {metrics['alpha']:.2f}, {metrics['tokens_per_pass']:.2f} tokens per target pass]"
    )


def run_generate(args: argparse.Namespace, prompt: str) -> None:
    if args.num_samples < 1:
        raise SpecDecError(f"num-samples must be >= 1, got {args.num_samples}")
    settings = settings_from_args(args)  # validates the numbers before any model loads
    pair, startup = load_pair_timed(args)
    prompt_ids = pair.encode_prompt(prompt, args.chat, settings.max_new_tokens)
    if not args.json:
        describe_pair(pair)
    loaded_at, first_token_at = now(), []
    if settings.rule in LOSSY_RULES and not args.no_speculation:
        print(f"note: the {settings.rule} rule is lossy: above temperature 0 its output is not distributed "
              "as the target's", file=sys.stderr)
    for sample_index in range(args.num_samples):
        settings = settings_from_args(args, seed_offset=sample_index)
        with tqdm(total=settings.max_new_tokens, unit="tok", file=sys.stderr,
                  disable=args.json or None, leave=False) as progress:

            def on_tokens(count: int) -> None:
                if not first_token_at:
                    first_token_at.append(now())
                progress.update(count)

            try:
                result = generate(pair, prompt_ids, settings, not args.no_speculation,
                                  on_tokens=on_tokens, detail=args.json)
            except torch.OutOfMemoryError as error:
                raise SpecDecError("out of memory: lower max-new-tokens or use smaller models") from error
        engine_line = None  # the summary in an engine's words (--metrics-style)
        if args.metrics_style and not args.no_speculation:
            engine_line = engine_summary(args.metrics_style, result.rounds, result.wall_seconds)
        if first_token_at and sample_index == 0:
            startup = startup.with_first_token(first_token_at[0] - loaded_at)
        if args.json:
            record = {"sample": sample_index, "seed": settings.seed, **result.to_dict()}
            if engine_line:
                record["engine_summary"] = engine_line
            if sample_index == 0:
                record["startup"] = startup.to_dict()
            print(json.dumps(record), flush=True)
        else:
            if args.num_samples > 1:
                print(f"--- sample {sample_index} (seed {settings.seed})")
            print(result.text)
            print(_summary_line(result.metrics, not args.no_speculation), file=sys.stderr)
            if engine_line:
                print(engine_line, file=sys.stderr)
            if sample_index == 0:
                print(startup.line(), file=sys.stderr)


def run_generate_batch(args: argparse.Namespace, prompts: list[str]) -> None:
    """generate --batch: every prompt in one batch (core.batch_rounds); each row samples with seed
    --seed, so a row's output is what generate gives that prompt alone."""
    from specdec.models.batch_runs import batch_generate, check_batchable

    if args.num_samples != 1:
        raise SpecDecError("--batch decodes one sample per prompt: leave out --num-samples")
    settings = settings_from_args(args)
    pair = load_pair(args)
    check_batchable(pair)
    prompt_ids = [pair.encode_prompt(prompt, args.chat, settings.max_new_tokens) for prompt in prompts]
    if not args.json:
        describe_pair(pair)
    total = settings.max_new_tokens * len(prompts)
    with tqdm(total=total, unit="tok", file=sys.stderr, disable=args.json or None, leave=False) as progress:
        try:
            result = batch_generate(pair, prompt_ids, settings, not args.no_speculation,
                                    on_tokens=progress.update, detail=args.json)
        except torch.OutOfMemoryError as error:
            raise SpecDecError("out of memory: fewer prompts, or lower max-new-tokens") from error
    for row, token_ids in enumerate(result.token_ids):
        metrics = result.row_metrics(row)
        if args.json:
            record = {"prompt": row, "seed": settings.seed, "token_ids": token_ids,
                      "text": pair.decode(token_ids), "rounds": [r.to_dict() for r in result.rounds[row]],
                      "metrics": metrics,
                      "wall_seconds": result.wall_seconds}  # the batch's wall time: every row waited for it
            print(json.dumps(record), flush=True)
        else:
            print(f"--- prompt {row + 1}")
            print(pair.decode(token_ids))
    if not args.json:
        rate = result.tokens / result.wall_seconds if result.wall_seconds else 0.0
        print(f"[batch of {len(prompts)}: {result.tokens} tokens, {rate:.1f} tokens/s in all, "
              f"{len(result.pass_seconds)} target passes]", file=sys.stderr)


def run_bench(args: argparse.Namespace) -> None:
    settings = settings_from_args(args)
    if args.batch_sizes is not None:
        run_batch_bench_command(args, settings)
        return
    prompt_sets = load_prompt_sets(args.prompt_set)
    race = parse_race(args.race) if args.race else None
    if args.race_lengths and not race:
        raise SpecDecError("--race-lengths needs --race: the drafters to run at those lengths")
    lengths = parse_race_lengths(args.race_lengths) if args.race_lengths else []
    if args.race_trees and not race:
        raise SpecDecError("--race-trees needs --race: the drafters to run with those trees")
    trees = parse_race_trees(args.race_trees) if args.race_trees else []
    pair, startup = load_pair_timed(args)
    startup = startup.with_first_token(first_token_seconds(pair))
    if not args.json:
        print(startup.line(), file=sys.stderr)
    report = run_bench_sets(pair, prompt_sets, settings, args.chat, args.repeats,
                            with_hf=not args.no_hf, log=None if args.json else sys.stderr, race=race,
                            race_lengths=lengths, race_trees=trees)
    report["startup"] = startup.to_dict()  # the race's drafters load later, inside run_bench_sets
    _print_report(report, args, format_bench_table)


def _print_report(report: dict, args: argparse.Namespace, table) -> None:
    """bench's report: JSON (and with --output, the same into a file), or `table(report)`."""
    if not args.json:
        print(table(report))
        return
    text = json.dumps(report, indent=2)
    if args.output:
        args.output.write_text(text + "\n", encoding="utf-8")
    print(text)


def run_export_draft(args: argparse.Namespace) -> None:
    from specdec.models.export import export_draft

    for path in export_draft(args.out, with_gguf=args.gguf):
        print(f"{path}  ({path.stat().st_size / 1e6:.1f} MB)")


def run_batch_bench_command(args: argparse.Namespace, settings) -> None:
    sizes = parse_batch_sizes(args.batch_sizes)
    prompt_sets = load_prompt_sets(args.prompt_set or [HELD_OUT_PROMPT_SETS["code"]])
    pair = load_pair(args)
    report = run_batch_bench(pair, prompt_sets, settings, args.chat, sizes,
                             log=None if args.json else sys.stderr)
    _print_report(report, args, format_batch_table)


def shipped_draft_parts() -> tuple[dict, list[int], int]:
    """The shipped draft's layers, its reduced head's token list and its depth."""
    from safetensors.torch import load_file

    from specdec.models.loading import HEAD_TOKENS_FILE, SHIPPED_DRAFT, SHIPPED_DRAFT_WEIGHTS

    parts = [SHIPPED_DRAFT / name for name in (SHIPPED_DRAFT_WEIGHTS, HEAD_TOKENS_FILE, "config.json")]
    missing = [path.name for path in parts if not path.is_file()]
    if missing:
        raise SpecDecError(f"the shipped draft ({SHIPPED_DRAFT.name}/) lacks {', '.join(missing)}")
    weights, tokens, config = parts
    depth = json.loads(config.read_text())["num_hidden_layers"]
    return load_file(weights), json.loads(tokens.read_text()), depth


def run_train_draft(args: argparse.Namespace) -> None:
    from specdec.models.loading import load_model
    from specdec.training.train_draft import train_draft

    config = config_from_args(DraftTrainingConfig, args)
    start_layers = head_token_ids = None
    if config.start_from_shipped:  # its layers, depth and token list (the feature head scores that list too)
        start_layers, head_token_ids, depth = shipped_draft_parts()
        config = replace(config, layers=max(config.layers, depth))  # deeper: new layers (train.grown)
    target = load_model(BUNDLED_TARGET, fast=True)  # the teacher: its bf16 labels are as good, made faster
    if target.device.type != "cpu":
        print(f"training on {target.device.type}", file=sys.stderr)
    output = args.output or args.work_dir / "draft"  # never the shipped draft unless asked for
    card = train_draft(target, args.work_dir, output, config,
                       log=lambda line: tqdm.write(line, file=sys.stderr), start_layers=start_layers,
                       head_token_ids=head_token_ids)
    print(json.dumps({k: card[k] for k in ("steps", "training_minutes", "answers")}))


def run_train_head(args: argparse.Namespace) -> None:
    from specdec.models.loading import load_model
    from specdec.training.train_feature_head import train_head

    config = config_from_args(HeadTrainingConfig, args)
    # The head scores the draft's frequent tokens (FR-Spec): the same list.
    draft_layers, head_token_ids, depth = shipped_draft_parts()
    if config.start_from_draft:  # the head takes the draft's layers, and so its depth
        config = replace(config, layers=depth)
    else:
        draft_layers = None
    target = load_model(BUNDLED_TARGET)  # what the head will read and draft for
    # Writes the answers (bf16 where that is faster); the campaign's are written already.
    teacher = target if config.campaign else load_model(BUNDLED_TARGET, fast=True)
    output = args.output or args.work_dir / "head"  # never the shipped head unless asked for
    card = train_head(teacher, target, head_token_ids, args.work_dir, output,
                      config, log=lambda line: tqdm.write(line, file=sys.stderr), draft_layers=draft_layers)
    print(json.dumps({k: card[k] for k in ("steps", "training_minutes", "answers")}))


def run_train_exit(args: argparse.Namespace) -> None:
    from specdec.models.loading import load_model
    from specdec.training.train_exit import train_exit

    config = config_from_args(ExitTrainingConfig, args)
    draft_layers, head_token_ids, depth = shipped_draft_parts()  # the adapter starts as the draft
    target = load_model(BUNDLED_TARGET)
    card = train_exit(target, head_token_ids, draft_layers, depth, args.work_dir, args.output, config,
                      log=lambda line: tqdm.write(line, file=sys.stderr))
    print(json.dumps({k: card[k] for k in ("steps", "training_minutes", "answers")}))


def run_campaign(args: argparse.Namespace) -> None:
    from specdec.kernels.matmul import ROWS, set_layout
    from specdec.models.loading import cpu_has_native_bf16, load_model
    from specdec.training.campaign import (
        campaign_answers_folder,
        campaign_features_folder,
        existing_shards,
        run_campaign,
    )

    if args.answers < 1 or args.batch < 1 or args.max_new_tokens < 1:
        raise SpecDecError("--answers, --batch and --max-new-tokens must be at least 1")
    target = load_model(BUNDLED_TARGET, fast=True)
    if target.device.type == "cuda" or cpu_has_native_bf16():
        # Many rows at once: bf16 math in the usual layout runs fastest here (measured; the one-row
        # layout a draft may get is slower for 64 rows).
        set_layout(target.model, ROWS)
        target.model.to(torch.bfloat16)
    answers_dir = args.answers_dir or campaign_answers_folder(args.greedy)
    features_dir = args.features_dir or campaign_features_folder(args.greedy)
    # The bar's rate and ETA count this run's shards only (initial: those made before).
    with tqdm(total=-(-args.answers // args.batch), initial=existing_shards(answers_dir),
              desc="campaign shards", unit="shard") as bar:
        def progress(report: dict) -> None:
            bar.n = report["shard"]
            bar.set_postfix(tok_s=f"{report['answer_tokens_per_second']:.0f}")
            bar.refresh()

        summary = run_campaign(target, answers_dir, features_dir, args.answers, args.batch,
                               args.max_new_tokens, minutes=args.minutes, progress=progress,
                               greedy=args.greedy)
    print(json.dumps({k: summary[k] for k in ("shards", "answers", "answer_positions", "kinds")}))


def run_eval_draft(args: argparse.Namespace) -> None:
    from specdec.training.evaluate import draft_figures, format_figures

    pair = ModelPair.load(args.target_model, args.draft_model)
    if pair.draft is None or pair.lookup_first:
        raise SpecDecError("eval-draft measures a draft model; for n-gram lookup or a feature head, "
                           "run bench, which races every drafter")
    figures = draft_figures(pair, args.eval_tokens, args.sampled)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        describe_pair(pair)
        print(format_figures(figures))


def _temperatures(args: argparse.Namespace) -> list[float]:
    if not args.temperatures:
        return [args.temperature]
    try:
        return [float(word) for word in args.temperatures.split(",")]
    except ValueError as error:
        raise SpecDecError(f"temperatures must be numbers separated by commas, got {args.temperatures!r}") \
            from error


def run_rules(args: argparse.Namespace) -> None:
    """Each rule against the target alone, at each temperature: one JSON object (or table row) each,
    with its exact TV and acceptance at the trial's position (measure.exact)."""
    from specdec.measure.exact import CustomRule, parse_position

    if args.sweep:
        run_sweep(args)
        return
    if not args.prompt:
        raise SpecDecError("rules needs --prompt (or --sweep)")
    settings = settings_from_args(args)
    trials = [replace(settings, sampling=replace(settings.sampling, temperature=t))
              for t in _temperatures(args)]
    if args.samples < 2 or not 1 <= args.tokens <= 4:
        raise SpecDecError("samples must be at least 2 and tokens 1 to 4")
    custom = CustomRule.of(args.accept, args.on_reject) if args.accept is not None else None
    if custom is not None and args.tokens > 1:
        raise SpecDecError("your own rule is compared on the first token only: use --tokens 1")
    position = parse_position(args.position)
    pair = load_pair(args)
    prompt_ids = pair.encode_prompt(args.prompt, args.chat, max(settings.gamma, args.tokens) + 1)
    if not args.json:
        describe_pair(pair)
    for trial_settings in trials:
        _rules_at(args, pair, prompt_ids, trial_settings, position, custom)


def _rules_at(args, pair, prompt_ids: list[int], settings, position, custom) -> None:
    """One trial at one temperature, at the position asked for."""
    from specdec.measure.exact import choose_position, exact_laws, resolved, unseen, watched_rule
    from specdec.measure.rules import rule_trial, trial_results

    where = {"position": 0, "context": ""}
    context = prompt_ids
    if position != 0:
        chosen, _ = choose_position(pair, prompt_ids, settings, position, custom)
        context = list(chosen.context)
        where = {"position": chosen.index, "context": pair.decode(context[len(prompt_ids):])}
    with tqdm(total=args.samples, unit="sample", file=sys.stderr, disable=args.json or None,
              leave=False) as progress:
        for trial in rule_trial(pair, context, settings, args.samples, args.tokens, custom=custom):
            progress.update(trial.samples - progress.n)
    results = trial_results(trial)
    if not args.json:
        print(f"T = {settings.sampling.temperature:g}, position {where['position']} of a target sample "
              f"(seed {settings.seed}); after the prompt: {where['context']!r}")
        print(f"{'rule':16} {'lossless':>8} {'T':>5} {'alpha':>6} {'tok/pass':>8} {'speed-up':>8} "
              f"{'TV':>6} {'floor':>6} {'chi2 p':>8} {'TV exact':>9} {'acc exact':>9}")
    for result in results:
        row = result.to_json() | where
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            exact = ("" if row["tv_exact"] is None
                     else f" {row['tv_exact']:>9.4f} {row['acceptance_exact']:>9.3f}")
            print(f"{row['rule']:16} {'yes' if row['lossless'] else 'NO':>8} {row['temperature']:>5.2f} "
                  f"{row['alpha']:>6.3f} {row['tokens_per_pass']:>8.2f} {row['speedup']:>7.2f}x "
                  f"{row['tv']:>6.3f} {row['tv_noise_floor']:>6.3f} {row['chi2_p']:>8.2g}" + exact)
    watched = next((r for r in results if r.rule == watched_rule(custom)), None)
    if watched is None or trial.first is None or watched.lossless or watched.tv_exact is None:
        return
    if not resolved(watched.tv_exact, watched.tv_noise_floor):
        law = exact_laws(trial.first, custom)[watched.rule]
        why = unseen(watched.rule, trial.first, law, watched.tv_noise_floor, watched.samples, pair.token_text)
        hint = "" if position == "auto" else "; --position auto runs it where its exact TV is largest"
        print(f"note: {watched.rule} cannot be seen here: {why}{hint}", file=sys.stderr)


def run_sweep(args: argparse.Namespace) -> None:
    """The exact rule on the held-out code and prose sets at each temperature: one row per set and T."""
    from specdec.measure.rules import SWEEP_TEMPERATURES, sweep_prompt_sets, sweep_summary, temperature_sweep

    if args.per_set < 1 or args.new_tokens < 1:
        raise SpecDecError("per-set and new-tokens must be at least 1")
    settings = replace(settings_from_args(args), max_new_tokens=args.new_tokens)
    temperatures = _temperatures(args) if args.temperatures else list(SWEEP_TEMPERATURES)
    for temperature in temperatures:
        replace(settings.sampling, temperature=temperature)  # checks each before any model loads
    pair = load_pair(args)
    prompt_sets = sweep_prompt_sets(per_set=args.per_set)
    total = len(temperatures) * sum(len(prompts) for prompts in prompt_sets.values())
    with tqdm(total=total, unit="prompt", file=sys.stderr, disable=args.json or None,
              leave=False) as progress:
        rows = []
        for row in temperature_sweep(pair, prompt_sets, settings, args.chat, temperatures):
            rows.append(row)
            progress.update(1)
    for row in sweep_summary(rows):
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            print(f"T={row['temperature']:<4g} {row['category']:6} alpha {row['alpha']:.3f} (expected "
                  f"{row['expected_alpha']:.3f}), {row['tokens_per_pass']:.2f} tokens/pass, "
                  f"speed-up {row['speedup']:.2f}x over {row['prompts']} prompts")
