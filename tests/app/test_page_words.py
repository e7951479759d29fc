"""Words on a slide: no sentence on a page's face (outside its expanders) runs over 30 words, and no
raw identifier shows where the pages have words for it. Every page, at its defaults, on the tiny pair."""

from __future__ import annotations

import re

import pytest
from app_driver import assert_clean, make_app
from streamlit.testing.v1.element_tree import Block, Expander

PAGES = ["app_pages/home.py", "app_pages/rounds.py", "app_pages/speedup.py", "app_pages/code_vs_prose.py",
         "app_pages/guarantee.py", "app_pages/rule_trial.py", "app_pages/idle_machine.py",
         "app_pages/batch_class.py", "app_pages/variants.py", "app_pages/stack.py"]
MAX_WORDS = 30
FULL = False  # the whole sentence in the message (scripts that list them set it)
TEXT_KINDS = {"markdown", "caption", "alert", "info", "warning", "success", "error", "text"}
# Raw names a reader should never meet on a page's face (the words the pages use instead exist).
RAW = [re.compile(p) for p in (r"<0x[0-9A-Fa-f]{2}>", r"<\|im_(?:start|end)\|>", r"\bcopy_heavy\b",
                               r"\d\.\d+e[+-]\d\d", r"\bngram\+")]


def face_texts(node) -> list[str]:
    """The texts of a page's face: every text element not inside an expander (folded by default)."""
    if isinstance(node, Expander):
        return []
    if isinstance(node, Block):
        return [text for child in node.children.values() for text in face_texts(child)]
    value = getattr(node, "value", None)
    return [value] if getattr(node, "type", "") in TEXT_KINDS and isinstance(value, str) else []


def plain(markdown: str) -> str:
    text = re.sub(r"<[^>]+>", " ", markdown)  # HTML drawn by the page (chips, legends)
    text = re.sub(r"`[^`]*`", "code", text)  # a code span reads as one word
    text = re.sub(r"\S*/\S+", "path", text)  # and so does a path or a model id
    text = re.sub(r"\]\([^)]*\)", "]", text)  # a link reads as its words
    return re.sub(r"[*_#>|]", " ", text)


def long_sentences(texts: list[str]) -> list[str]:
    found = []
    for text in texts:
        for sentence in re.split(r"(?<=[.!?])\s+|\n+", plain(text)):
            words = re.findall(r"[\w’'-]+", sentence)
            if len(words) > MAX_WORDS:
                shown = sentence.strip() if FULL else f"{sentence.strip()[:90]}…"
                found.append(f"{len(words)} words: {shown}")
    return found


def test_the_check_finds_a_long_sentence_and_skips_expanders():
    """Negative control: a 31-word sentence is caught, a 30-word one is not."""
    assert long_sentences([" ".join(["word"] * 31) + "."])
    assert not long_sentences([" ".join(["word"] * 30) + ". " + " ".join(["word"] * 30) + "."])


@pytest.mark.slow  # every page on the tiny pair: several seconds
@pytest.mark.parametrize("page", PAGES)
def test_no_sentence_on_a_page_face_runs_over_30_words_and_no_raw_names(tiny_pair_dirs, page):
    at = make_app(tiny_pair_dirs, page)
    assert_clean(at)
    texts = face_texts(at.main)
    assert texts, "the walk found no text: the check would pass on anything"
    assert not long_sentences(texts), long_sentences(texts)
    raw = [text[:80] for text in texts for pattern in RAW if pattern.search(text)]
    assert not raw, raw
