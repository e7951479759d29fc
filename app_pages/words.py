"""Names as the pages write them: a drafter in the sidebar's words, never its identifier."""

from app_pages.sidebar import DRAFTER_NAMES
from specdec.models.pair import LOOKUP_FIRST


def drafter_words(name: str) -> str:
    """'ngram+bundled:…-draft' -> 'n-gram lookup, then draft model' (the sidebar's DRAFTER_NAMES); a
    model of the user's own keeps its name, after 'n-gram lookup, then' where lookup drafts first."""
    if name in DRAFTER_NAMES:
        return DRAFTER_NAMES[name]
    if name.startswith(LOOKUP_FIRST):
        return f"n-gram lookup, then {drafter_words(name.removeprefix(LOOKUP_FIRST))}"
    return name
