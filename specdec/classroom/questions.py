"""A question put to the whole room: what may be answered, how an answer is checked, and what the
room's answers add up to beside the measured truth.

A question is either a choice among options (one answer is an option's index) or one or more
sliders over a range (one answer is a number per slider). Its shape is saved with the question when
the instructor opens it, so a student's answer is checked against what was asked, whatever the page
or the link says later.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass, field

from specdec.errors import SpecDecError

MAX_ID_CHARS = 40
MAX_NICKNAME_CHARS = 24
MAX_VALUE_CHARS = 40  # one answer's text as typed or sent: a number or an option's index
ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")


@dataclass(frozen=True)
class Question:
    """`options`: the choices (an answer is one index); else `parts` sliders from `low` to `high`."""

    id: str
    text: str
    options: tuple[str, ...] = ()
    low: float = 0.0
    high: float = 1.0
    step: float = 0.05
    parts: tuple[str, ...] = ("",)  # the sliders' names ("" for one slider)
    unit: str = ""  # shown after a slider's value, e.g. "%"
    correct: tuple[int, ...] = field(default=())  # options known right before any measurement

    def __post_init__(self):
        if not ID_PATTERN.fullmatch(self.id):
            raise SpecDecError(f"question id {self.id[:MAX_ID_CHARS]!r}: lower-case letters, digits, '-'")
        finite = math.isfinite(self.low) and math.isfinite(self.high)
        if not self.options and not (finite and self.low < self.high):
            raise SpecDecError(f"question {self.id}: a slider needs a finite range, low < high")

    @property
    def is_choice(self) -> bool:
        return bool(self.options)

    def check(self, values: list[float] | tuple[float, ...]) -> tuple[float, ...]:
        """The answer as stored, or SpecDecError in one line if it is not one this question takes."""
        expected = 1 if self.is_choice else len(self.parts)
        if len(values) != expected:
            raise SpecDecError(f"this question takes {expected} value(s), not {len(values)}")
        checked = []
        for value in values:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise SpecDecError("an answer must be a finite number")
            if self.is_choice:
                if value != int(value) or not 0 <= value < len(self.options):
                    raise SpecDecError(f"no option {value:g}: this question has {len(self.options)} (0 to "
                                      f"{len(self.options) - 1})")
            elif not self.low <= value <= self.high:
                raise SpecDecError(f"{value:g} is out of range: answer from {self.low:g} to {self.high:g}")
            checked.append(float(value))
        return tuple(checked)

    def to_json(self) -> str:
        return json.dumps({"id": self.id, "text": self.text, "options": list(self.options), "low": self.low,
                           "high": self.high, "step": self.step, "parts": list(self.parts),
                           "unit": self.unit, "correct": list(self.correct)})

    @classmethod
    def from_json(cls, text: str) -> Question:
        data = json.loads(text)
        return cls(data["id"], data["text"], tuple(data["options"]), data["low"], data["high"], data["step"],
                   tuple(data["parts"]), data["unit"], tuple(data["correct"]))


def parse_values(raw: str | list | tuple | float) -> tuple[float, ...]:
    """An answer as sent (numbers, or text such as '3' or '0.7,0.4') as numbers; SpecDecError if not."""
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return (float(raw),)
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    if isinstance(raw, str) and len(raw) > MAX_VALUE_CHARS:
        raise SpecDecError(f"an answer is a number or an option, not {len(raw)} characters")
    values = []
    for item in items:
        if isinstance(item, bool):
            raise SpecDecError("an answer must be a number")
        try:
            values.append(float(item))
        except (TypeError, ValueError) as error:
            raise SpecDecError(f"{str(item)[:MAX_VALUE_CHARS]!r} is not a number") from error
    return tuple(values)


CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")


def clean_nickname(text: str | None) -> str:
    """An optional nickname: control and direction characters dropped, spaces trimmed, at most 24
    characters (SpecDecError if longer). It is shown escaped wherever it is shown."""
    if text is None:
        return ""
    if not isinstance(text, str):
        raise SpecDecError("a nickname must be text")
    cleaned = " ".join(CONTROL.sub("", text).split())
    if len(cleaned) > MAX_NICKNAME_CHARS:
        raise SpecDecError(f"a nickname has at most {MAX_NICKNAME_CHARS} characters, not {len(cleaned)}")
    return cleaned


@dataclass(frozen=True)
class Tally:
    """The room's answers to one question: how many, and per option (or per slider) what was sent."""

    question: Question
    count: int  # browsers that answered
    per_option: tuple[int, ...]  # choice questions: answers per option
    values: tuple[tuple[float, ...], ...]  # slider questions: every answer per slider (one tuple per part)

    def medians(self) -> tuple[float, ...]:
        return tuple(statistics.median(part) if part else math.nan for part in self.values)


def tally(question: Question, answers: list[tuple[float, ...]]) -> Tally:
    """The room's answers (one tuple of values per browser) added up."""
    if question.is_choice:
        counts = [0] * len(question.options)
        for (value,) in answers:
            counts[int(value)] += 1
        return Tally(question, len(answers), tuple(counts), ())
    parts = tuple(tuple(answer[i] for answer in answers) for i in range(len(question.parts)))
    return Tally(question, len(answers), (), parts)


def verdict(result: Tally, truth: tuple[float, ...]) -> list[str]:
    """One line per slider (how far the median guess was from the truth) or one for the options (how
    many chose the right one)."""
    question = result.question
    if question.is_choice:
        right = sum(result.per_option[int(i)] for i in truth)
        names = " and ".join(question.options[int(i)] for i in truth) or "none of them"
        share = f"{right} of {result.count}" if result.count else "nobody answered"
        return [f"Right: {names}. {share} chose it."]
    lines = []
    for name, median, true in zip(question.parts, result.medians(), truth, strict=True):
        label = f"{name}: " if name else ""
        if math.isnan(median):
            lines.append(f"{label}measured {true:g}{question.unit}; nobody answered")
        else:
            gap = median - true
            gap_unit = " points" if question.unit == "%" else question.unit  # a gap in % is in points
            off = f"{abs(gap):.2g}{gap_unit} too {'high' if gap > 0 else 'low'}" if gap else "exactly right"
            lines.append(f"{label}measured {true:.3g}{question.unit}, the room's median guess "
                         f"{median:.3g}{question.unit}: {off}")
    return lines
