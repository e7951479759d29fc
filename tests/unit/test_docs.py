"""The docs cannot drift: links resolve, quoted commands parse, generated pages are current, sizes hold.

Fast: no model is loaded. The pages: README.md, docs/**/*.md and the model and data cards
(assets/*/README.md)."""

from __future__ import annotations

import importlib.util
import re
import shlex
import unicodedata
from pathlib import Path

import pytest

from specdec.cli.main import build_parser
from specdec.errors import SpecDecError

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CARDS = sorted(ROOT.glob("assets/*/README.md"))
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md")), *CARDS]
# The log keeps each experiment's commands as they were run that day, some abbreviated ("the same
# arguments"), and flags may have changed since: its commands are history, not instructions.
COMMAND_PAGES = [page for page in PAGES if page.name != "LOG.md"]
CODE_FOLDERS = ("specdec", "app_pages", "scripts", "experiments")

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*```")
INLINE_CODE = re.compile(r"`[^`\n]+`")
# A redirection, a pipe or the end of $( ... ): the command ends there.
SHELL_STOP = re.compile(r"^(\d?>|<|\||;|&&|\))")


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def load_script(name: str):
    """A script of ours by file name, wherever it lives (scripts/ or experiments/)."""
    path = next(p for folder in ("scripts", "experiments") if (p := ROOT / folder / name).exists())
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- reading markdown ------------------------------------------------------------------------------

def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code blanked out (links there are not links)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(INLINE_CODE.sub("``", line))
    return lines


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[*_`]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, counts = set(), {}
    for line in prose_lines(path.read_text(encoding="utf-8")):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            base = anchor(match.group(1))
            number = counts.get(base, 0)
            counts[base] = number + 1
            found.add(base if number == 0 else f"{base}-{number}")
    return found


def links(path: Path) -> list[str]:
    return [target for line in prose_lines(path.read_text(encoding="utf-8")) for target in LINK.findall(line)]


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
            continue
        file_part, _, fragment = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{target} (no heading #{fragment})")
    return broken


def quoted_commands(path: Path) -> list[str]:
    """Every `python -m specdec ...` in a shell code block (continuation lines joined) or in inline code,
    as the argument list after `specdec`, cut at a comment, redirection or pipe."""
    text = path.read_text(encoding="utf-8")
    pieces, fenced, shell, logical = [], False, False, ""
    for line in text.splitlines():
        fence = FENCE.match(line)
        if fence:
            fenced = not fenced
            shell = fenced and line.strip().strip("`") in ("", "bash", "sh", "shell", "console")
            continue
        if fenced:
            if shell:
                logical += line.rstrip().removesuffix("\\") + " "
                if not line.rstrip().endswith("\\"):
                    pieces.append(logical)
                    logical = ""
        else:
            pieces += [code.strip("`") for code in INLINE_CODE.findall(line)]
    commands = []
    for piece in pieces:
        for match in re.finditer(r"python -m specdec\s+(\S.*)", piece):
            commands.append(match.group(1))
    return commands


def argv(command: str) -> list[str]:
    try:
        split = shlex.split(command, comments=True)
    except ValueError:  # a command quoted inside a string ("...") ends at its closing quote
        split = shlex.split(command.split('"')[0], comments=True)
    words = []
    for word in split:
        if SHELL_STOP.match(word):
            break
        words.append(word)
    return words


# --- the tests -----------------------------------------------------------------------------------------

def test_the_pages_exist_and_are_found():
    names = {rel(p) for p in PAGES}
    for wanted in ("README.md", "docs/tutorial.md", "docs/LOG.md", "docs/benchmarks.md",
                   "docs/reference/cli.md", "assets/draft/README.md", "assets/feature_head/README.md"):
        assert wanted in names


def test_readme_is_a_front_door():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


@pytest.mark.parametrize("card", CARDS, ids=rel)
def test_a_card_stays_a_card(card):
    size = card.stat().st_size
    assert size <= 8 * 1024, f"{rel(card)} is {size} bytes: its history goes to docs/LOG.md"


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_the_link_check_can_fail(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# A heading, here\n", encoding="utf-8")
    page.write_text("[ok](there.md#a-heading-here) [gone](missing.md) [bad](there.md#nowhere) "
                    "`[code](not-a-link.md)`\n", encoding="utf-8")
    assert broken_links(page) == ["missing.md (no such file)", "there.md#nowhere (no heading #nowhere)"]


@pytest.mark.parametrize("page", COMMAND_PAGES, ids=rel)
def test_every_quoted_command_parses(page):
    failures = []
    for command in quoted_commands(page):
        try:
            build_parser().parse_args(argv(command))
        except (SpecDecError, SystemExit, ValueError) as error:
            failures.append(f"python -m specdec {command.rstrip()}: {error}")
    assert failures == []


def test_the_command_check_reads_blocks_and_inline_code(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Run `python -m specdec generate --prompt hi --gamma 3`.\n\n```bash\n"
                    "python -m specdec bench --temperature 0 \\\n    --no-hf   # a comment\n"
                    "x=$(python -m specdec generate --prompt \"$p\" 2>/dev/null)\n```\n", encoding="utf-8")
    commands = [argv(c) for c in quoted_commands(page)]
    assert ["generate", "--prompt", "hi", "--gamma", "3"] in commands
    assert ["bench", "--temperature", "0", "--no-hf"] in commands
    assert ["generate", "--prompt", "$p"] in commands
    with pytest.raises(SpecDecError):
        build_parser().parse_args(["bench", "--no-such-flag"])


def test_the_cli_reference_is_what_its_generator_prints():
    page = ROOT / "docs" / "reference" / "cli.md"
    assert page.read_text(encoding="utf-8") == load_script("cli_reference.py").render(), \
        "run scripts/cli_reference.py"


def test_the_benchmarks_page_and_the_readme_table_are_rendered_from_the_reports():
    render = load_script("render_benchmarks.py")
    reports = render.load_reports()
    assert (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8") == render.render_page(reports), \
        "run scripts/render_benchmarks.py"
    readme = README.read_text(encoding="utf-8")
    assert render.readme_block(reports) in readme, "run scripts/render_benchmarks.py"


def test_the_summary_table_reads_the_default_row_of_each_cpu():
    render = load_script("render_benchmarks.py")
    default = "n-gram, then model, adaptive"
    sets = {name: {"prompts": 6, "methods": {
                "target only": {"tokens_per_second": 20.0, "over_target_only": 1.0},
                default: {"tokens_per_second": 30.0, "over_target_only": 1.5 + i / 100, "alpha": 0.7}}}
            for i, name in enumerate(render.HELD_OUT)}
    cpu = {"model": "AMD EPYC 7B13", "cores": 2, "avx512": False, "avx512_bf16": False, "amx": False,
           "kernels_held_to": {}}
    report = {"cpu": cpu, "default_method": default, "sets": sets,
              "provenance": {"date": "2026-12-06", "commit": "abc1234", "command": "python -m specdec bench"}}
    older = {**report, "provenance": {**report["provenance"], "date": "2026-12-01", "commit": "0000000"}}
    sampled = {**report, "temperature": 1.0, "provenance": {**report["provenance"], "commit": "1111111"}}
    table = render.summary_table([("new.json", report), ("t1.json", sampled), ("old.json", older)])
    assert "| 2026-12-06 | AMD EPYC 7B13 (2 cores; AVX2 only) | abc1234 | 0 | 1.50× | 1.51× |" in table
    assert "| 2026-12-06 | AMD EPYC 7B13 (2 cores; AVX2 only) | 1111111 | 1 | 1.50× |" in table
    assert table.index("abc1234") < table.index("1111111")  # greedy first
    assert "0000000" not in table  # one row per CPU and temperature: the newest
    assert "python -m specdec bench" in table


def test_docs_paths_named_in_the_code_exist():
    missing = []
    for folder in CODE_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")) if (ROOT / folder).exists() else []:
            for cited in re.findall(r"docs/[\w./-]+\.md", path.read_text(encoding="utf-8")):
                if not (ROOT / cited).exists():
                    missing.append(f"{rel(path)}: {cited}")
    assert missing == []
