"""One server, many students: which models a shared link may load, and loads that already failed.

A link such as `/rounds?target=<any id>` must not make the server fetch whatever it names. The server
loads only the models on its allow-list: by default the bundled pair and the models it was started
with (SPECDEC_TARGET, SPECDEC_DRAFTER); SPECDEC_ALLOWED_MODELS (comma-separated) replaces that list,
and "*" allows any model.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from specdec.errors import SpecDecError
from specdec.models.pair import LOOKUP_FIRST, NGRAM
from specdec.paths import BUNDLED_DRAFT, BUNDLED_HEAD, BUNDLED_TARGET

ANY_MODEL = "*"


def allowed_models(environ: Mapping[str, str]) -> frozenset[str] | None:
    """The model names this server may load; None means any."""
    started_with = {environ.get("SPECDEC_TARGET", BUNDLED_TARGET), environ.get("SPECDEC_DRAFTER", "")}
    listed = environ.get("SPECDEC_ALLOWED_MODELS", "").strip()
    if listed == ANY_MODEL:
        return None
    bundled = {BUNDLED_TARGET, BUNDLED_DRAFT, BUNDLED_HEAD}
    names = {name.strip() for name in listed.split(",")} if listed else bundled
    return frozenset((names | started_with | {NGRAM}) - {""})


def check_allowed(target: str, drafter: str, allowed: frozenset[str] | None) -> None:
    """SpecDecError naming what may be loaded, if `target` or `drafter` is not on the list."""
    if allowed is None:
        return
    for role, name in (("target", target), ("drafter", drafter.removeprefix(LOOKUP_FIRST))):
        if name not in allowed:
            raise SpecDecError(
                f"this server does not load the {role} '{name}': it loads only "
                f"{', '.join(sorted(allowed))} (the server's SPECDEC_ALLOWED_MODELS sets the list)"
            )


class LoadFailures:
    """Loads that failed, by (target, drafter), so a bad link costs its time once, not on every rerun."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._messages: dict[tuple[str, str], str] = {}

    def get(self, key: tuple[str, str]) -> str | None:
        with self._lock:
            return self._messages.get(key)

    def remember(self, key: tuple[str, str], message: str) -> None:
        with self._lock:
            self._messages[key] = message

    def forget(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._messages.pop(key, None)
