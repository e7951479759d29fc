"""bench's report: its tables as printed, and the rule that picks the default drafter from
several machines' reports (scripts/choose_default.py applies it).
"""

from __future__ import annotations

from specdec.cli.bench import HEAD_LABELS, TARGET_ONLY
from specdec.models.feature_head_files import is_head
from specdec.models.pair import LOOKUP_FIRST


def measured_best(reports: list[dict], fastest_on: str = "code", keep_within: float = 0.0
                  ) -> tuple[str | None, dict[str, dict]]:
    """The rule the bundled target's default drafter is chosen by, over bench reports from several
    machines: of the speculative rows never slower than the target alone on any set of any report, and
    whose drafter has a batched form (`serves_batches`), the one fastest on `fastest_on` (by its lower
    ratio over the reports: a default must suit every machine). The reports' current default stays
    unless another row leads it there by more than `keep_within` (a lead inside the runs' noise is no
    reason to change). Rows are pooled by their `method_names` (a drafter's label depends on what else
    raced), by label in reports without them.
    -> (the chosen row's name or None, per row name: its worst ratio anywhere, its ratio on
    `fastest_on` in each report (None in a report where it did not run there) and whether it serves
    batches)."""
    rows: dict[str, dict] = {}
    for number, report in enumerate(reports):
        for set_name, entry in report["sets"].items():
            for label, row in entry["methods"].items():
                if label == TARGET_ONLY:
                    continue
                name = row_name(report, label)
                figures = rows.setdefault(name, {"worst": float("inf"), fastest_on: [None] * len(reports),
                                                 "batched": True})
                figures["worst"] = min(figures["worst"], row["over_target_only"])
                figures["batched"] &= serves_batches(name, label)
                if set_name == fastest_on:
                    figures[fastest_on][number] = row["over_target_only"]

    def lower_ratio(name: str) -> float | None:
        return min((ratio for ratio in rows[name][fastest_on] if ratio is not None), default=None)

    candidates = [name for name, figures in rows.items()
                  if figures["worst"] >= 1.0 and lower_ratio(name) is not None and figures["batched"]]

    chosen = max(candidates, key=lower_ratio, default=None)
    current = row_name(reports[0], reports[0].get("default_method")) if reports else None
    if current in candidates and lower_ratio(chosen) - lower_ratio(current) <= keep_within:
        chosen = current
    return chosen, rows


def serves_batches(name: str, label: str) -> bool:
    """Whether a bench row's drafter has a batched form, as the default's must: the default drafts for
    the batched page and commands too ("A class is a batch"), where a feature head is refused
    (models.batch_runs.check_batchable). A head is known by its name (`row_name`) where its folder is
    here, else by its row's label (a head's folder on another machine; a report from before
    `method_names`, where the name is the label)."""
    drafter = name.split(",")[0].removeprefix(LOOKUP_FIRST)
    return not (is_head(drafter) or label.startswith(HEAD_LABELS))


def row_name(report: dict, label: str | None) -> str | None:
    """A bench row's name across reports: its `method_names` entry; its label in a report without them."""
    return report.get("method_names", {}).get(label, label)


def format_bench_table(report: dict) -> str:
    width = max(29, *(len(label) + 2 for label in report["methods"]))  # + " *" on the default
    cpu = report["cpu"]
    extensions = [name for name in ("avx512", "avx512_bf16", "amx") if cpu[name]] or ["no AVX-512, no AMX"]
    held = ", ".join(f"{k}={v}" for k, v in cpu["kernels_held_to"].items())
    lines = [f"cpu: {cpu['model']} ({cpu['cores']} cores; {', '.join(extensions)})"
             + (f"; kernels held to {held}" if held else ""),
             f"target: {report['target']}"]
    if gpu := report.get("gpu"):
        lines.insert(1, f"gpu: {gpu['name']} ({gpu['memory_gib']} GiB; CUDA {gpu['cuda']}, "
                        f"torch {gpu['torch']})")
    lines += [f"drafter, {label}: {description}" for label, description in report["drafters"].items()]
    lines += [
        f"gamma={report['gamma']} draft_threshold={report['draft_threshold']} "
        f"temperature={report['temperature']} top_k={report['top_k']} top_p={report['top_p']} "
        f"max_new_tokens={report['max_new_tokens']} chat={report['chat']} repeats={report['repeats']}",
        "",
        f"{'set':<11} {'method':<{width}} {'tok/s':>6} {'÷target':>8} {'÷HF':>6} {'alpha':>6} "
        f"{'drafts/rnd':>10} {'tok/pass':>8} {'theory':>7} {'here':>6}",
    ]

    def cell(row: dict, key: str, width: int, unit: str = "") -> str:
        return (f"{row[key]:.2f}{unit}" if key in row else "-").rjust(width)

    for name, entry in report["sets"].items():
        for position, (label, row) in enumerate(entry["methods"].items()):
            shown = label + (" *" if label == report["default_method"] else "")
            lines.append(" ".join([
                f"{name if position == 0 else '':<11} {shown:<{width}} {row['tokens_per_second']:>6.1f}",
                cell(row, "over_target_only", 8, "x"), cell(row, "over_hf_assisted", 6, "x"),
                cell(row, "alpha", 6), cell(row, "drafted_per_round", 10), cell(row, "tokens_per_pass", 8),
                cell(row, "theoretical_speedup", 7, "x"), cell(row, "theoretical_speedup_here", 6, "x"),
            ]))
    lines.append(
        "*: the default (what generate does without --draft-model or --drafter). "
        "÷target: tokens/s over target-only's; ÷HF: over transformers' assisted generation with the same "
        "drafter and γ. theory: E[tokens/pass] / (k̄c + v) from the measured alpha, drafts per round and "
        "cost ratio c (one drafted token / one plain step), v = 1 as in the paper; here: with v "
        "measured (the rounds' verify time / one plain step; on a CPU v > 1)."
    )
    return "\n".join(lines)


def format_batch_table(report: dict) -> str:
    lines = [f"target: {report['target']}", f"drafter: {report['drafter']}",
             f"gamma={report['gamma']} adaptive={report['adaptive']} temperature={report['temperature']} "
             f"max_new_tokens={report['max_new_tokens']} chat={report['chat']}", "",
             f"{'set':<11} {'B':>3} {'target tok/s':>12} {'spec tok/s':>10} {'ratio':>6} "
             f"{'per row tok/s':>13} {'pass ms/row':>11}"]
    for name, entry in report["sets"].items():
        for position, (size, row) in enumerate(entry["batch_sizes"].items()):
            lines.append(f"{name if position == 0 else '':<11} {size:>3} "
                         f"{row['target_only_tokens_per_second']:>12.1f} "
                         f"{row['speculative_tokens_per_second']:>10.1f} {row['ratio']:>5.2f}x "
                         f"{row['per_row_tokens_per_second']:>13.1f} "
                         f"{row['pass_seconds_per_row'] * 1000:>11.1f}")
        single = entry.get("single_sequence")
        if single:
            lines.append(f"{'':<11} the single-sequence loop at B=1: "
                         f"{single['speculative_tokens_per_second']:.1f} tok/s; the batched loop at B=1 runs "
                         f"at {single['batched_over_single']:.2f}x it")
    lines.append("tok/s: all rows together; ratio: speculative over target-only; per row: speculative tok/s "
                 "/ B; pass ms/row: one target-only pass over B rows / B.")
    return "\n".join(lines)
