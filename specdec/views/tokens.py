"""Tokens as a reader can see them: whitespace made visible, a piece of a character split across
tokens as ⟨piece·F0·9F⟩ (its bytes), and a special token in words (⟨end·of·answer⟩)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the labels are pure text functions; only token_label reads a loaded pair
    from specdec.models.pair import ModelPair

_VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}
_BYTE_TOKEN = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")
# How a token is drawn everywhere (chips, chart axes, tables): a run of RUN or more identical
# whitespace or control characters is written once with its count (a newline then 25 spaces:
# "↵␣×25"), and a label longer than MAX_TOKEN_CHARS is cut with "…" (never inside a mark or a count).
RUN = 3
MAX_TOKEN_CHARS = 16
_PIECE = re.compile(r"<0x[0-9A-F]{2}>(?:×\d+)?|⟨[^⟩]*⟩|.×\d+|.", re.DOTALL)
# Chat-template tokens in the words a page uses; any other special token shows its name without <| |>.
SPECIAL_WORDS = {"<|im_start|>": "turn start", "<|im_end|>": "end of answer", "<|endoftext|>": "end of text",
                 "</s>": "end of text", "<s>": "text start", "<|eot_id|>": "end of answer"}
# Inside a label, words are parted by a middle dot, not a space: a run's tokens are written with spaces
# between them (the CSV download), and a label must stay one word there.
WORD_GAP = "·"


@lru_cache(maxsize=1)
def _byte_level_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: printable stand-in character -> the byte it encodes."""
    printable = list(range(ord("!"), ord("~") + 1))
    printable += list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = [], 0
    for byte in range(256):
        if byte in printable:
            chars.append(byte)
        else:
            chars.append(256 + extra)
            extra += 1
    return {chr(code): byte for byte, code in zip(range(256), chars, strict=True)}


def _mark(char: str) -> str | None:
    """The visible mark of a whitespace or control character; None for a printable one."""
    if char in _VISIBLE:
        return _VISIBLE[char]
    if ord(char) < 32 or ord(char) == 127:
        return f"<0x{ord(char):02X}>"
    return None


def visible_text(text: str) -> str:
    """Whitespace made visible: spaces ␣, newlines ↵, tabs ⇥; other control characters as <0xNN>;
    a run of RUN or more of one such character written once with its count ("␣×25"), unless a digit
    follows it."""
    out = []
    for run in re.finditer(r"(.)\1*", text, re.DOTALL):
        char, count = run.group(1), len(run.group(0))
        mark = _mark(char)
        if mark is None:
            out.append(run.group(0))
        elif count >= RUN and not text[run.end() : run.end() + 1].isdigit():  # "␣×3" then "5" would read 35
            out.append(f"{mark}×{count}")
        else:
            out.append(mark * count)
    return "".join(out)


def capped(label: str, width: int = MAX_TOKEN_CHARS) -> str:
    """A label at most `width` characters long: cut with "…" between marks, never inside one."""
    if len(label) <= width or re.fullmatch(r"⟨[^⟩]*⟩", label):  # one mark in words is never cut
        return label
    out = ""
    for piece in _PIECE.findall(label):
        if len(out) + len(piece) > width - 1:
            break
        out += piece
    return out + "…"


def token_label(pair: ModelPair, token_id: int) -> str:
    """A token as a reader can see it, the one way every page draws it: whitespace visible and
    run-length compacted, a piece of a character as ⟨piece·C3⟩, a special token in words, at most
    MAX_TOKEN_CHARS wide."""
    return capped(_full_label(pair, token_id))


def special_label(name: str) -> str:
    """A special token (<|im_end|>) in words: ⟨end·of·answer⟩."""
    words = SPECIAL_WORDS.get(name) or name.strip("<|>").replace("_", " ") or name
    return f"⟨{words.replace(' ', WORD_GAP)}⟩"


def piece_label(byte_values: list[int]) -> str:
    """Bytes of a character split across tokens: ⟨piece·F0·9F⟩."""
    return "⟨piece" + "".join(f"{WORD_GAP}{b:02X}" for b in byte_values) + "⟩"


def _full_label(pair: ModelPair, token_id: int) -> str:
    tokenizer = pair.target.tokenizer
    raw = tokenizer.convert_ids_to_tokens(token_id) or ""
    if token_id in tokenizer.all_special_ids:
        return special_label(raw)
    text = pair.token_text(token_id)
    if "\ufffd" not in text and text:
        return visible_text(text)
    if _BYTE_TOKEN.match(raw):  # SentencePiece byte-fallback tokens are named <0xNN>
        return piece_label([int(raw[3:5], 16)])
    table = _byte_level_decoder()
    if raw and all(char in table for char in raw):  # byte-level BPE: every character is one byte
        return piece_label([table[char] for char in raw])
    return visible_text(text) or f"⟨token {token_id}⟩"


_FENCE = re.compile(r"```([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def prose_and_code(text: str) -> list[tuple[str, str, str | None]]:
    """Split an answer into ("prose", text, None) and ("code", code, language) parts at ``` fences,
    so a page can show code as code; an unclosed fence (an answer cut mid-block) runs to the end."""
    parts, at = [], 0
    for match in _FENCE.finditer(text):
        if text[at : match.start()].strip():
            parts.append(("prose", text[at : match.start()].strip("\n"), None))
        parts.append(("code", match.group(2).rstrip("\n"), match.group(1) or None))
        at = match.end()
    if text[at:].strip():
        parts.append(("prose", text[at:].strip("\n"), None))
    return parts
