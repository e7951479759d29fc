"""Render docs/benchmarks.md, the README's "How fast" table and the model cards' model-index from the
bench reports committed in docs/benchmarks/*.json, so that no figure on those pages is typed by hand.

A report is what `python -m specdec bench ... --json --output FILE` writes, plus a `provenance` object
that `stamp` adds once, right after the run, on the machine that ran it:

    .venv/bin/python -m specdec bench --temperature 0 --repeats 2 --json --output docs/benchmarks/X.json
    .venv/bin/python scripts/render_benchmarks.py stamp docs/benchmarks/X.json \
        --command "python -m specdec bench --temperature 0 --repeats 2 --json --output X.json"
    .venv/bin/python scripts/render_benchmarks.py          # rewrite docs/benchmarks.md and README's table
    .venv/bin/python scripts/render_benchmarks.py --check         # exit 1 where either differs

`provenance`: date, time (UTC, when it was stamped; for reports stamped before stamp recorded it, when
the report was committed), commit, command, versions (Python, torch, transformers), and a note
(optional). Reports are shown newest first, by date, then time, then file name, each under a heading of
its own; nothing here asks git, so a shallow clone renders the same page.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "docs" / "benchmarks"
PAGE = ROOT / "docs" / "benchmarks.md"
README = ROOT / "README.md"
START, END = "<!-- how-fast:start -->", "<!-- how-fast:end -->"
# The model cards' `model-index` (their YAML metadata): each drafter's α alone on the held-out sets, from
# the newest report per temperature that ran it. card -> (the report's method, the model's name, words).
CARDS = {
    ROOT / "assets" / "draft" / "README.md": ("draft model, adaptive", "specdec-SmolLM2-135M-Instruct-draft",
                                              "the draft alone"),
    ROOT / "assets" / "feature_head" / "README.md": ("feature head, adaptive",
                                                     "specdec-SmolLM2-135M-Instruct-head",
                                                     "the feature head alone"),
    ROOT / "assets" / "exit_adapter" / "README.md": ("exit adapter, adaptive",
                                                     "specdec-SmolLM2-135M-Instruct-exit",
                                                     "the exit adapter alone"),
}
INDEX_START, INDEX_END = "# model-index:start", "# model-index:end"
HELD_OUT = ("code", "structured", "prose", "math", "questions", "summaries")  # assets/prompts/*.json
TARGET_ONLY = "target only"
WIDE_UP_TO = 4  # a race of up to this many rows gets one column per row; a full bench, one line per row


# --- reading -------------------------------------------------------------------------------------------

def load_reports(folder: Path = REPORTS) -> list[tuple[str, dict]]:
    """(file name, report) for every report, newest first (by date, then time of day, then name)."""
    reports = [(path.name, json.loads(path.read_text(encoding="utf-8")))
               for path in sorted(folder.glob("*.json"))]
    return sorted(reports, key=lambda item: (provenance(item[1]).get("date", ""), time_of_day(item[1]),
                                             item[0]), reverse=True)


def provenance(report: dict) -> dict:
    return report.get("provenance", {})


def time_of_day(report: dict) -> str:
    """"HH:MM" (UTC) from the provenance, "" where it has none (those sort first within their date)."""
    return provenance(report).get("time", "")


def cpu_name(report: dict) -> str:
    """"AMD EPYC 7B13 (2 cores; AVX2 only)", with the kernel caps a run was held to."""
    cpu = report.get("cpu")
    if not cpu:
        return "CPU not recorded"
    features = (("avx512", "AVX-512"), ("avx512_bf16", "AVX512-BF16"), ("amx", "AMX"))
    extensions = [label for key, label in features if cpu.get(key)]
    extensions = extensions or ["AVX2 only" if not cpu.get("kernels_held_to") else "no AVX-512"]
    name = f"{cpu['model']} ({cpu['cores']} cores; {', '.join(extensions)})"
    held = cpu.get("kernels_held_to") or {}
    return name + (f", kernels held to {', '.join(f'{k}={v}' for k, v in held.items())}" if held else "")


def machine_name(report: dict) -> str:
    """The CPU, or the GPU and the CPU beside it where the models ran on a GPU (the report's `gpu`)."""
    gpu = report.get("gpu")
    if not gpu:
        return cpu_name(report)
    return f"{gpu['name']} ({gpu['memory_gib']} GiB, CUDA {gpu['cuda']}) with {cpu_name(report)}"


def versions(report: dict) -> str:
    found = provenance(report).get("versions") or {}
    return ", ".join(f"{name} {version}" for name, version in found.items()) or "not recorded"


def settings(report: dict) -> str:
    return (f"γ {report['gamma']}, draft threshold {report['draft_threshold']}, "
            f"temperature "
            f"{report['temperature']}, top-k {report['top_k']}, top-p {report['top_p']}, "
            f"{report['max_new_tokens']} new tokens, chat template {'on' if report['chat'] else 'off'}")


def runs(report: dict) -> str:
    prompts = sorted({entry["prompts"] for entry in report["sets"].values()})
    counts = "/".join(str(p) for p in prompts)
    counts += " prompt a set" if prompts == [1] else " prompts a set"
    if "repeats" not in report:
        return f"{counts}, one run each"
    times = "once" if report["repeats"] == 1 else f"{report['repeats']} times"
    return f"{counts}, each method {times} per prompt, in turns, one process"


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}×"


def set_names(report: dict) -> str:
    """"the six held-out sets", "the six later sets", "all twelve sets", or the sets' names."""
    names = set(report["sets"])
    held_out, later = set(HELD_OUT), {f"later-{name}" for name in HELD_OUT}
    known = {frozenset(held_out): "the six held-out sets", frozenset(later): "the six later sets",
             frozenset(held_out | later): "all twelve sets"}
    return known.get(frozenset(names), ", ".join(report["sets"]))


# --- one report --------------------------------------------------------------------------------------

def what_ran(report: dict) -> str:
    """"batched decoding", "the default drafter", "5 drafters" or the one drafter's name."""
    if is_batch(report):
        return "batched decoding"
    methods = [m for m in report["methods"] if m != TARGET_ONLY]
    if len(methods) != 1:
        return f"{len(methods)} drafters"
    return "the default drafter" if methods[0] == report.get("default_method") else methods[0]


def title(report: dict) -> str:
    """A report's heading: when, what at which temperature, on which sets, on which machine."""
    when = provenance(report).get("date", "date not recorded")
    return (f"{when}: {what_ran(report)} at T = {float(report.get('temperature', 0.0)):g}, "
            f"{set_names(report)} — {machine_name(report)}")


def header(name: str, report: dict, heading: str | None = None) -> list[str]:
    source = provenance(report)
    commit = source.get("commit", "not recorded")
    lines = [f"## {heading or title(report)}", "",
             f"- CPU: {cpu_name(report)}"]
    gpu = report.get("gpu")
    if gpu:
        lines.append(f"- GPU: {gpu['name']}, {gpu['memory_gib']} GiB, CUDA {gpu['cuda']}, "
                     f"torch {gpu['torch']}")
    lines += [f"- Versions: {versions(report)}; commit {commit}",
              f"- Target: {report['target']}"]
    lines += [f"- Drafter, {label}: {text}" for label, text in report.get("drafters", {}).items()]
    if "drafter" in report:
        lines.append(f"- Drafter: {report['drafter']}")
    lines += [f"- Settings: {settings(report)}",
              f"- Runs: {runs(report)}",
              f"- Report: [`{name}`](benchmarks/{name})"]
    if source.get("note"):
        lines.append(f"- Note: {source['note']}")
    lines += ["", "```bash", source.get("command", "# command not recorded"), "```", ""]
    return lines


def race_table(report: dict) -> list[str]:
    """Sets down, the speculative rows across: speed over the target alone (α)."""
    methods = [m for m in report["methods"] if m != TARGET_ONLY]
    default = report.get("default_method")
    titles = [m + (" (default)" if m == default else "") for m in methods]
    lines = ["| set | target alone, tokens/s | " + " | ".join(titles) + " |",
             "| --- | --- |" + " --- |" * len(methods)]
    for set_name, entry in report["sets"].items():
        rows = entry["methods"]
        cells = []
        for method in methods:
            row = rows.get(method, {})
            alpha = f" (α {row['alpha']:.2f})" if "alpha" in row else ""
            cells.append(ratio(row.get("over_target_only")) + alpha)
        base = rows.get(TARGET_ONLY, {}).get("tokens_per_second")
        lines.append(f"| {set_name} | {'-' if base is None else f'{base:.1f}'} | " + " | ".join(cells) + " |")
    return lines


def full_table(report: dict) -> list[str]:
    """One line per set and method, as bench prints it."""
    lines = ["| set | method | tokens/s | ÷ target alone | ÷ transformers | α | drafts a round "
             "| tokens a pass |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for set_name, entry in report["sets"].items():
        for position, (label, row) in enumerate(entry["methods"].items()):
            shown = label + (" (default)" if label == report.get("default_method") else "")
            numbers = [f"{row[key]:.2f}" if key in row else "-"
                       for key in ("alpha", "drafted_per_round", "tokens_per_pass")]
            lines.append(f"| {set_name if position == 0 else ''} | {shown} | "
                         f"{row['tokens_per_second']:.1f} | "
                         f"{ratio(row.get('over_target_only'))} | {ratio(row.get('over_hf_assisted'))} | "
                         + " | ".join(numbers) + " |")
    return lines


def batch_table(report: dict) -> list[str]:
    lines = ["| set | B | target alone, tokens/s | speculative, tokens/s | ratio | one pass, ms a row |",
             "| --- | --- | --- | --- | --- | --- |"]
    for set_name, entry in report["sets"].items():
        for position, (size, row) in enumerate(entry["batch_sizes"].items()):
            lines.append(f"| {set_name if position == 0 else ''} | {size} | "
                         f"{row['target_only_tokens_per_second']:.1f} | "
                         f"{row['speculative_tokens_per_second']:.1f} | "
                         f"{ratio(row['ratio'])} | {row['pass_seconds_per_row'] * 1000:.1f} |")
    return lines


def is_batch(report: dict) -> bool:
    return any("batch_sizes" in entry for entry in report["sets"].values())


def report_section(name: str, report: dict, heading: str | None = None) -> list[str]:
    if is_batch(report):
        table = batch_table(report)
    elif len(report["methods"]) - 1 <= WIDE_UP_TO:
        table = race_table(report)
    else:
        table = full_table(report)
    return header(name, report, heading) + table + [""]


def headings(reports: list[tuple[str, dict]]) -> list[str]:
    """Each report's title, its file name added where two titles would read the same."""
    titles = [title(report) for _, report in reports]
    return [text + (f" ({name})" if titles.count(text) > 1 else "")
            for text, (name, _) in zip(titles, reports, strict=True)]


# --- the summary: the default drafter on the held-out kinds, one row per CPU ------------------------------

def summary_rows(reports: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """The newest report per machine (CPU and kernel caps, or GPU) and temperature that ran the default
    drafter on every held-out set; greedy first."""
    chosen: dict[tuple[str, float], tuple[str, dict]] = {}
    for name, report in reports:  # newest first
        default = report.get("default_method")
        if is_batch(report) or not default or not all(s in report["sets"] for s in HELD_OUT):
            continue
        chosen.setdefault((machine_name(report), float(report.get("temperature", 0.0))), (name, report))
    return [chosen[key] for key in sorted(chosen, key=lambda key: (key[1], key[0]))]


def summary_table(reports: list[tuple[str, dict]]) -> str:
    rows = summary_rows(reports)
    if not rows:
        return ("No report with the default drafter on all six held-out sets is committed yet "
                "(see [reproduce the benchmark](docs/howto/reproduce-benchmarks.md)).")
    lines = ["| date | CPU | commit | T | " + " | ".join(HELD_OUT) + " |",
             "| --- | --- | --- | --- |" + " --- |" * len(HELD_OUT)]
    commands = []
    for _, report in rows:
        source = provenance(report)
        default = report["default_method"]
        cells = [ratio(report["sets"][s]["methods"][default]["over_target_only"]) for s in HELD_OUT]
        lines.append(f"| {source.get('date', '-')} | {machine_name(report)} | {source.get('commit', '-')} | "
                     f"{report.get('temperature', 0.0):g} | " + " | ".join(cells) + " |")
        commands.append(source.get("command", "# command not recorded"))
    distinct = list(dict.fromkeys(commands))
    lines += ["", "Speed of the default drafter over the target alone at temperature T (0: greedy), made by:",
              "", "```bash", *distinct, "```"]
    return "\n".join(lines)


# --- the page ----------------------------------------------------------------------------------------

def render_page(reports: list[tuple[str, dict]]) -> str:
    lines = [
        "# Benchmarks",
        "",
        "<!-- Generated by scripts/render_benchmarks.py from docs/benchmarks/*.json; "
        "do not edit by hand. -->",
        "",
        "Current figures only, each table rendered from a bench report committed in",
        "[`docs/benchmarks/`](benchmarks/README.md). How to make one, and how the runs are held comparable:",
        "[reproduce the benchmark](howto/reproduce-benchmarks.md). Earlier measurements, with the code and",
        "models of their day: [the lab notebook](LOG.md).",
        "",
        "Ratios are tokens per second over the target alone's, measured side by side in the same process",
        "(methods take turns per prompt). α is accepted drafts over drafts tested. A CPU's speed moves from",
        "hour to hour; compare ratios within a table, not tokens per second across tables.",
        "",
        "## The default drafter on the held-out sets",
        "",
        summary_table(reports).replace("](docs/", "]("),
        "",
    ]
    for (name, report), heading in zip(reports, headings(reports), strict=True):
        lines += report_section(name, report, heading)
    return "\n".join(lines).rstrip() + "\n"


def readme_block(reports: list[tuple[str, dict]]) -> str:
    return f"{START}\n{summary_table(reports)}\n{END}"


def replace_readme_block(text: str, block: str) -> str:
    start, end = text.index(START), text.index(END) + len(END)
    return text[:start] + block + text[end:]


# --- the model cards' model-index -----------------------------------------------------------------------

def index_reports(reports: list[tuple[str, dict]], method: str) -> list[tuple[str, dict]]:
    """Per temperature, the report with `method` on every held-out set (CPU runs) that ran the most
    prompts a set, the newest of those: a short race does not replace a full run. Lowest T first."""
    chosen: dict[float, tuple[str, dict]] = {}

    def prompts(report: dict) -> int:
        return min(report["sets"][s].get("prompts", 0) for s in HELD_OUT)

    for name, report in reports:  # newest first
        if is_batch(report) or report.get("gpu") or not all(
                method in report["sets"].get(s, {}).get("methods", {}) for s in HELD_OUT):
            continue
        temperature = float(report.get("temperature", 0.0))
        if temperature not in chosen or prompts(report) > prompts(chosen[temperature][1]):
            chosen[temperature] = (name, report)
    return [chosen[t] for t in sorted(chosen)]


def model_index(reports: list[tuple[str, dict]], method: str, model: str, words: str) -> str:
    """The YAML of a card's model-index, between its markers: α per held-out set, per temperature."""
    lines = [INDEX_START + " (scripts/render_benchmarks.py writes it from docs/benchmarks/)", "model-index:",
             f"  - name: {model}", "    results:"]
    for name, report in index_reports(reports, method):
        temperature = float(report.get("temperature", 0.0))
        lines += ["      - task:", "          type: text-generation",
                  f"          name: Speculative decoding, {words}, "
                  f"T = {temperature:g}",
                  "        dataset:", "          type: specdec-held-out-prompts",
                  f"          name: specdec held-out prompt sets (assets/prompts, "
                  f"{runs(report).split(',')[0]})",
                  "        metrics:"]
        lines += [f"          - {{type: acceptance_rate, name: α {s}, "
                  f"value: {report['sets'][s]['methods'][method]['alpha']:.2f}}}" for s in HELD_OUT]
        lines += ["        source:",
                  f"          name: docs/benchmarks/{name} ({provenance(report).get('date', 'undated')}, "
                  f"{machine_name(report)})"]
    return "\n".join(lines + [INDEX_END])


def replace_model_index(text: str, block: str) -> str:
    start, end = text.index(INDEX_START), text.index(INDEX_END) + len(INDEX_END)
    return text[:start] + block + text[end:]


def rendered_cards(reports: list[tuple[str, dict]]) -> dict[Path, str]:
    """Each model card with its model-index rendered from the reports."""
    return {card: replace_model_index(card.read_text(encoding="utf-8"), model_index(reports, *about))
            for card, about in CARDS.items()}


# --- stamping a fresh report -------------------------------------------------------------------------

def stamp(path: Path, command: str, note: str | None) -> None:
    import torch
    import transformers

    report = json.loads(path.read_text(encoding="utf-8"))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip() or "unknown"
    now = datetime.datetime.now(datetime.UTC)
    report["provenance"] = {
        "date": now.date().isoformat(),
        "time": now.strftime("%H:%M"),
        "commit": commit,
        "command": command,
        "versions": {"Python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__},
    } | ({"note": note} if note else {})
    path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"stamped {path}: {report['provenance']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is out of date")
    parser.add_argument("--readme-table", action="store_true", help="print the README's table and stop")
    sub = parser.add_subparsers(dest="action")
    mark = sub.add_parser("stamp", help="add date, commit, versions and the command to a fresh report")
    mark.add_argument("report", type=Path)
    mark.add_argument("--command", required=True, help="the bench command that wrote the report")
    mark.add_argument("--note")
    args = parser.parse_args()
    if args.action == "stamp":
        stamp(args.report, args.command, args.note)
        return 0
    reports = load_reports()
    if args.readme_table:
        print(summary_table(reports))
        return 0
    page = render_page(reports)
    readme = replace_readme_block(README.read_text(encoding="utf-8"), readme_block(reports))
    written = {PAGE: page, README: readme} | rendered_cards(reports)
    if args.check:
        stale = [str(p.relative_to(ROOT)) for p, text in written.items()
                 if not p.exists() or p.read_text(encoding="utf-8") != text]
        print(f"out of date: {', '.join(stale)} (run scripts/render_benchmarks.py)" if stale
              else "up to date")
        return 1 if stale else 0
    for path, text in written.items():
        path.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)} ({len(reports)} reports), README.md's table and the model "
          "cards' model-index")
    return 0


if __name__ == "__main__":
    sys.exit(main())
