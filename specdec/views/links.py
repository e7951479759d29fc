"""Shared links: the app's settings read from a URL's query parameters, every change said out loud.

A link is untrusted input. A value out of range is clamped to the range the app offers, a value that
is not a number (or not finite) falls back to the default, an over-long prompt is cut; each change
comes back as one line the page shows, never silently.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

TRUE_WORDS, FALSE_WORDS = ("1", "true", "on", "yes"), ("0", "false", "off", "no")


def _parse(kind: type, text: str):
    if kind is bool:
        word = text.strip().lower()
        if word not in TRUE_WORDS + FALSE_WORDS:
            raise ValueError(text)
        return word in TRUE_WORDS
    value = kind(text)
    if kind is float and not math.isfinite(value):
        raise ValueError(text)
    return value


def read_link(
    params: Mapping[str, str],
    defaults: Mapping[str, object],
    ranges: Mapping[str, tuple],
    max_prompt_chars: int,
    choices: Mapping[str, tuple] | None = None,
) -> tuple[dict[str, object], list[str]]:
    """-> (settings, notices). `defaults` names every setting a link may carry and gives its type;
    `ranges` the (low, high) the app offers for the numeric ones, `choices` the values allowed for
    the others that have a fixed set; "prompt" is read as text."""
    choices = choices or {}
    values, notices = {}, []
    for name, default in defaults.items():
        if name not in params:
            continue
        text = params[name]
        try:
            value = _parse(type(default), text)
        except ValueError:
            notices.append(f"{name}={text!r} is not a valid value: using the default, {default}")
            continue
        if name in choices and value not in choices[name]:
            notices.append(f"{name}={text!r} is not one of {', '.join(choices[name])}: using {default}")
            continue
        if name in ranges:
            low, high = ranges[name]
            clamped = min(max(value, type(value)(low)), type(value)(high))
            if clamped != value:
                side = "smallest" if value < low else "largest"
                notices.append(f"{name}={text} is out of range: using the {side} allowed, {clamped}")
            value = clamped
        values[name] = value
    if "prompt" in params:
        prompt = params["prompt"]
        if len(prompt) > max_prompt_chars:
            notices.append(f"the prompt in the link has {len(prompt):,} characters: cut to the first "
                           f"{max_prompt_chars:,}, this server's limit")
            prompt = prompt[:max_prompt_chars]
        values["prompt"] = prompt
    return values, notices
