"""Tokens as a reader can see them: whitespace made visible, incomplete UTF-8 pieces as <0xNN> bytes."""

from __future__ import annotations

import re
from functools import lru_cache

from specdec.models.pair import ModelPair

_VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}
_BYTE_TOKEN = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")


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


def visible_text(text: str) -> str:
    """Whitespace made visible: spaces ␣, newlines ↵, tabs ⇥; other control characters as <0xNN>."""
    out = []
    for char in text:
        if char in _VISIBLE:
            out.append(_VISIBLE[char])
        elif ord(char) < 32 or ord(char) == 127:
            out.append(f"<0x{ord(char):02X}>")
        else:
            out.append(char)
    return "".join(out)


def token_label(pair: ModelPair, token_id: int) -> str:
    """A token as a reader can see it: whitespace visible, incomplete UTF-8 pieces as <0xNN> bytes."""
    text = pair.token_text(token_id)
    if "\ufffd" not in text and text:
        return visible_text(text)
    raw = pair.target.tokenizer.convert_ids_to_tokens(token_id) or ""
    if _BYTE_TOKEN.match(raw):  # SentencePiece byte-fallback tokens are already named <0xNN>
        return raw.upper().replace("0X", "0x")
    table = _byte_level_decoder()
    if raw and all(char in table for char in raw):  # byte-level BPE: every character is one byte
        return "".join(f"<0x{table[char]:02X}>" for char in raw)
    return visible_text(text) or f"<id {token_id}>"


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
