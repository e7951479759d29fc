"""Code vs prose in words: a kind of text as a reader names it, and the page's quiz, its question and
its feedback, in one run's numbers. No Streamlit here.

The quiz asks about two kinds (code against prose where both ran, else the fastest kind against the
slowest), and its feedback speaks of those same two. What the page holds the same across kinds is
the sampling (temperature, top-k, top-p), γ and the token budget per prompt; the prompts themselves,
their length included, differ from kind to kind, and the feedback never says otherwise.
"""

from __future__ import annotations

from specdec.views.numbers import figure

RIGHT = "predictability"
CHOICES = {
    "temperature": "The writing tool samples at a higher temperature",
    "context": "Code prompts have longer contexts",
    "length": "Code answers are longer",
    RIGHT: "Continuations of code are more predictable, so more drafts are accepted",
}
HELD = "the same temperature, γ and budget of new tokens per prompt"
# Why each wrong answer is not the reason, in what the page did
NOT_IT = {
    "temperature": "Every kind ran at the same temperature here, so temperature cannot make the gap.",
    "context": "Context length was not held the same (each prompt has its own), but it costs the "
               "speculative run and the target alone alike; how many drafts the target keeps depends on "
               "what the text says next.",
    "length": "Every prompt had the same budget of new tokens, so the answers' length cannot make the gap.",
}


def kind_words(category: str) -> str:
    """A prompt set's name as a reader writes it: 'copy_heavy' -> 'copy-heavy'."""
    return category.replace("_", "-")


def compared(summary: list[dict]) -> tuple[dict, dict]:
    """The two kinds the quiz asks about: code and prose where both ran, else the fastest and the
    slowest by speed-up."""
    by = {s["category"]: s for s in summary}
    if "code" in by and "prose" in by:
        return by["code"], by["prose"]
    return max(summary, key=lambda s: s["speedup"]), min(summary, key=lambda s: s["speedup"])


def quiz_question(summary: list[dict]) -> str:
    """The quiz's question in this run's numbers."""
    first, second = compared(summary)
    a, b, x, y = first["category"], second["category"], first["speedup"], second["speedup"]
    if {a, b} == {"code", "prose"} and x <= y:
        return (f"Here code ran at {x:.2f}× and prose at {y:.2f}×: no gap this run. On more prompts, "
                "code usually gains more than prose: why?")
    return f"Here {a} ran at {x:.2f}× and {b} at {y:.2f}×, with {HELD}: why the gap?"


def _numbers(kind: dict) -> str:
    return (f"**{kind['category']}** kept {kind['acceptance_rate']:.0%} of its drafts "
            f"({kind['tokens_per_pass']:.2f} tokens per target pass, {kind['speedup']:.2f}×)")


def quiz_feedback(summary: list[dict], answer: str, per_category: int) -> tuple[bool, str]:
    """(right, the feedback): the two kinds the question asked about, in this run's numbers, and what
    was held the same. Says so where this run does not show the lesson's pattern."""
    first, second = compared(summary)
    numbers = f"On this page {_numbers(first)} and {_numbers(second)}, with {HELD}."
    shown = first["acceptance_rate"] > second["acceptance_rate"]
    caveat = "" if shown else (
        f" This run does not show it for {first['category']} and {second['category']} ({per_category} "
        "prompt(s) a kind is few): run more prompts per kind.")
    if answer == RIGHT:
        return True, (f"Right. {numbers} What differs is the text: {first['category']} continues in ways a "
                      "small drafter can guess (syntax, names already in the context, repeated patterns), "
                      f"while {second['category']} has more good next words.{caveat}")
    return False, (f"Not the main reason. {NOT_IT[answer]} {numbers} What differs is how predictable "
                   f"the continuations are, which sets the acceptance rate α.{caveat}")


def prompt_rows(rows: list[dict]) -> list[dict]:
    """The page's 'Every prompt' table: each prompt's run in words and 2–3 significant digits (no
    identifiers for headers, no '13.4000'). A reloaded file need only hold the checked numbers
    (timing.check_saved_results): the others show as '–'."""

    def optional(row: dict, key: str, digits: int = 3) -> str:
        value = row.get(key)
        return "–" if not isinstance(value, int | float) else figure(value, digits)

    return [{"kind": kind_words(str(row["category"])), "prompt": row["prompt"],
             "acceptance": f"{row['acceptance_rate']:.0%}", "tokens / pass": f"{row['tokens_per_pass']:.2f}",
             "drafts a round": optional(row, "drafted_per_round", 2),
             "speculative tokens/s": optional(row, "speculative_tokens_per_second"),
             "target alone tokens/s": optional(row, "target_tokens_per_second"),
             "speed-up": f"{row['speedup']:.2f}×", "text": str(row.get("text", ""))}
            for row in rows]
