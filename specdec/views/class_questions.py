"""The questions the lesson puts to the whole room, each where the lesson asks it, and the measured
answer each is revealed against (from what the page measured)."""

from __future__ import annotations

import statistics

from specdec.classroom.questions import Question
from specdec.config import LOSSY_RULES, RULE_NAMES
from specdec.views import prompt_kinds

RULE_WORDS = {  # the rules as a room reads them (sidebar's names, shorter)
    "speculative": "min(1, p/q) with the residual (speculative sampling)",
    "top_choice": "keep x if it is the target's top choice",
    "sample_compare": "draw from p, keep x if the draw is x",
    "typical": "typical acceptance (Medusa)",
}

# Home: the lesson's check question, its options in the code-vs-prose quiz's words.
CHECK_ORDER = ("temperature", prompt_kinds.RIGHT, "context", "length")
CHECK = Question("check", "A code assistant gets 2.5× from speculative decoding, an open-ended writing tool "
                 "1.3×. Why?", options=tuple(prompt_kinds.CHOICES[k] for k in CHECK_ORDER),
                 correct=(CHECK_ORDER.index(prompt_kinds.RIGHT),))
CODE_VS_PROSE = Question("code-vs-prose", "What share of drafted tokens will the target accept, for code and "
                         "for prose?", low=0, high=100, step=5, parts=("code", "prose"), unit="%")
GUARANTEE = Question("guarantee", "Does speculation change the distribution of the output?",
                     options=("No: it is exactly the target's", "Yes, a little: the draft leaks in",
                              "Yes, noticeably: it leans toward the draft", "Only above temperature 0"),
                     correct=(0,))
RULE_TRIAL = Question("rule-trial", "Which rules will the trial catch changing the output's distribution?",
                      options=tuple(RULE_WORDS.get(name, name) for name in RULE_NAMES))
LOSSY = tuple(RULE_NAMES.index(name) for name in LOSSY_RULES)  # what the theory says the trial catches


def drafts_survive(drafted: int, round_number: int) -> Question:
    """Round by round: how many of the round's drafts will the target keep? (One question per round.)"""
    return Question(f"round-{round_number}", f"Round {round_number}: the draft proposed {drafted} tokens. "
                    "How many will survive the acceptance test?",
                    options=tuple(str(n) for n in range(drafted + 1)))


def acceptance_truth(rows: list[dict]) -> tuple[float, float] | None:
    """Code vs prose, measured: the median acceptance of code and of prose prompts (in %), or None
    before both have run."""
    by = {}
    for row in rows:
        by.setdefault(row["category"], []).append(row["acceptance_rate"])
    if "code" not in by or "prose" not in by:
        return None
    return 100 * statistics.median(by["code"]), 100 * statistics.median(by["prose"])


def caught_truth(rows: list[dict]) -> tuple[int, ...] | None:
    """The rule on trial, measured: the rules whose samples fell outside the noise band."""
    if not rows:
        return None
    return tuple(RULE_NAMES.index(r["rule"]) for r in rows
                 if r["rule"] in RULE_NAMES and r["tv"] > r["tv_noise_band"])
