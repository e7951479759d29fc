"""The docs hold together: every docs page is linked from another page, every model and data card carries
its metadata and licence, and the README's speed figures and the cards' α are the committed reports'.

Fast: no model is loaded. Each check is a function of the files' text, tried first on a made-up input
it must reject, so that a check that passes is one that could have failed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))
CARDS = sorted(ROOT.glob("assets/*/README.md"))
REPORTS = ROOT / "docs" / "benchmarks"
MODEL_CARDS = {ROOT / "assets" / "draft" / "README.md": "draft model, adaptive",
               ROOT / "assets" / "feature_head" / "README.md": "feature head, adaptive",
               ROOT / "assets" / "exit_adapter" / "README.md": "exit adapter, adaptive"}
MODEL_KEYS = {"license", "base_model", "datasets", "language", "pipeline_tag", "library_name", "tags",
              "model-index"}
DATA_KEYS = {"pretty_name", "license", "language", "size_categories", "task_categories", "tags"}
HELD_OUT = ("code", "structured", "prose", "math", "questions", "summaries")

LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?(?:\s+\"[^\"]*\")?\)")
RATIO = re.compile(r"^(\d+\.\d\d)×$")


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# --- every docs page linked ------------------------------------------------------------------------

def links_from(page: Path, text: str) -> set[str]:
    """The repository files a Markdown page links to (relative links, anchors dropped)."""
    found = set()
    for target in LINK.findall(text):
        if "://" in target or target.startswith("mailto:"):
            continue
        path = (page.parent / target).resolve()
        if path.is_relative_to(ROOT):
            found.add(rel(path))
    return found


def unlinked(pages: dict[Path, str], wanted: list[Path]) -> list[str]:
    """The wanted pages that no *other* page links to."""
    linked = {(rel(page), target) for page, text in pages.items() for target in links_from(page, text)}
    return [rel(page) for page in wanted
            if not any(target == rel(page) and source != rel(page) for source, target in linked)]


def test_the_link_check_finds_a_page_linked_only_from_itself():
    a, b = ROOT / "docs" / "a.md", ROOT / "docs" / "howto" / "b.md"
    pages = {README: "[a](docs/a.md)", a: "[me](a.md) [up](../README.md)", b: "[b again](b.md#top)"}
    assert unlinked(pages, [a, b]) == ["docs/howto/b.md"]


def test_every_docs_page_is_linked_from_another_page():
    pages = {page: page.read_text(encoding="utf-8") for page in [README, *DOCS, *CARDS]}
    assert len(DOCS) >= 10
    missing = unlinked(pages, DOCS)
    assert not missing, f"docs pages no other page links to (the README's docs table may): {missing}"


# --- the cards' metadata ---------------------------------------------------------------------------

def front_matter(text: str) -> dict:
    """A card's YAML metadata: the block between the first two '---' lines ({} if none)."""
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    return (yaml.safe_load(match.group(1)) or {}) if match else {}


def card_problems(text: str, model: bool) -> list[str]:
    """What a model card (or a data card) lacks: metadata keys, a licence, α in model-index."""
    meta = front_matter(text)
    problems = [f"no {key}" for key in sorted((MODEL_KEYS if model else DATA_KEYS) - set(meta))]
    if meta.get("license") == "other" and not {"license_name", "license_link"} <= set(meta):
        problems.append("license other without license_name and license_link")
    if not model and not re.search(r"^## Licen[cs]e", text, re.M):
        problems.append("no licence section")
    if model:
        results = [r for entry in meta.get("model-index") or [] for r in entry.get("results", [])]
        if not any(m.get("type") == "acceptance_rate" for r in results for m in r.get("metrics", [])):
            problems.append("no measured α (acceptance_rate) in model-index")
    return problems


def test_the_card_check_rejects_a_card_without_metadata():
    assert "no datasets" in card_problems("---\nlicense: apache-2.0\n---\n# A draft\n", model=True)
    assert "no measured α (acceptance_rate) in model-index" in card_problems("# A draft\n", model=True)
    assert "no licence section" in card_problems("---\nlicense: apache-2.0\n---\n# Data\n", model=False)
    assert "license other without license_name and license_link" in card_problems(
        "---\nlicense: other\n---\n", model=False)


@pytest.mark.parametrize("card", CARDS, ids=rel)
def test_every_card_has_its_metadata_and_licence(card):
    problems = card_problems(card.read_text(encoding="utf-8"), model=card in MODEL_CARDS)
    assert not problems, f"{rel(card)}: {', '.join(problems)}"


def test_the_model_and_data_cards_are_found():
    assert set(MODEL_CARDS) <= set(CARDS)
    assert {"assets/campaign/README.md", "assets/campaign-greedy/README.md"} <= {rel(c) for c in CARDS}


# --- figures against the committed reports ----------------------------------------------------------

def reports() -> dict[str, dict]:
    return {path.name: json.loads(path.read_text(encoding="utf-8"))
            for path in sorted(REPORTS.glob("*.json"))}


def how_fast_rows(readme: str) -> list[list[str]]:
    """The cells of the README's "How fast" table, one list per row below its header."""
    section = readme.split("## How fast", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in section.splitlines() if line.startswith("|")]
    return [row for row in rows[2:] if row]


def readme_mismatches(readme: str, found: dict[str, dict]) -> list[str]:
    """Each README speed figure against its report (the row's commit and T name it, among the reports
    that ran the default drafter): what differs."""
    problems, rows = [], how_fast_rows(readme)
    if not rows:
        return ["no How fast table"]
    for row in rows:
        date, _, commit, temperature, *ratios = row
        matches = [r for r in found.values() if r.get("provenance", {}).get("commit") == commit
                   and float(r.get("temperature", 0.0)) == float(temperature) and r.get("default_method")]
        if len(matches) != 1:
            problems.append(f"{date} {commit} T = {temperature}: {len(matches)} reports match")
            continue
        report = matches[0]
        default = report["default_method"]
        for name, cell in zip(HELD_OUT, ratios, strict=True):
            wanted = f"{report['sets'][name]['methods'][default]['over_target_only']:.2f}×"
            if not RATIO.match(cell) or cell != wanted:
                problems.append(f"{commit} T = {temperature} {name}: README {cell}, report {wanted}")
    return problems


def test_the_readme_check_catches_a_changed_figure():
    readme = README.read_text(encoding="utf-8")
    row = how_fast_rows(readme)[0]
    changed = readme.replace(" | ".join(row), " | ".join([*row[:4], "9.99×", *row[5:]]), 1)
    assert changed != readme
    assert any("README 9.99×" in p for p in readme_mismatches(changed, reports()))


def test_the_readme_speed_figures_are_the_committed_reports():
    found = reports()
    assert found, "no committed reports in docs/benchmarks/"
    assert not readme_mismatches(README.read_text(encoding="utf-8"), found)


def alpha_mismatches(text: str, method: str, found: dict[str, dict]) -> list[str]:
    """Each α in a model card's model-index against the report its result names as its source."""
    problems = []
    for entry in front_matter(text).get("model-index") or []:
        for result in entry.get("results", []):
            source = str(result.get("source", {}).get("name", "")).split(" ")[0]
            name = source.removeprefix("docs/benchmarks/")
            if name not in found:
                problems.append(f"source {name!r} is not a committed report")
                continue
            for metric in result.get("metrics", []):
                set_name = str(metric.get("name", "")).removeprefix("α ")
                wanted = round(found[name]["sets"][set_name]["methods"][method]["alpha"], 2)
                if metric.get("value") != wanted:
                    problems.append(f"{name} {set_name}: card {metric.get('value')}, report {wanted}")
    return problems


def test_the_alpha_check_catches_a_changed_figure():
    card = next(iter(MODEL_CARDS))
    text = card.read_text(encoding="utf-8")
    changed = re.sub(r"(name: α code, value: )[0-9.]+", r"\g<1>0.01", text, count=1)
    assert changed != text
    assert alpha_mismatches(changed, MODEL_CARDS[card], reports())


@pytest.mark.parametrize("card", list(MODEL_CARDS), ids=rel)
def test_the_model_cards_alpha_is_the_committed_reports(card):
    assert not alpha_mismatches(card.read_text(encoding="utf-8"), MODEL_CARDS[card], reports())
