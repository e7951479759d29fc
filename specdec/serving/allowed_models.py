"""One server, many students: which models a shared link may load, and loads that already failed.

A link such as `/rounds?target=<any id>` must not make the server fetch whatever it names. The server
loads only the models on its allow-list: by default the bundled pair and the models it was started
with (SPECDEC_TARGET, SPECDEC_DRAFTER); SPECDEC_ALLOWED_MODELS (comma-separated) replaces that list,
and "*" allows any model.
"""

from __future__ import annotations

import ctypes
import gc
import threading
from collections.abc import Callable, Mapping

import psutil

from specdec.errors import SpecDecError
from specdec.model_names import early_exit_layers
from specdec.models.pair import LOOKUP_FIRST, NGRAM, ModelPair
from specdec.paths import BUNDLED_DRAFT, BUNDLED_EXIT, BUNDLED_HEAD, BUNDLED_TARGET

ANY_MODEL = "*"


def allowed_models(environ: Mapping[str, str]) -> frozenset[str] | None:
    """The model names this server may load; None means any."""
    started_with = {environ.get("SPECDEC_TARGET", BUNDLED_TARGET), environ.get("SPECDEC_DRAFTER", "")}
    listed = environ.get("SPECDEC_ALLOWED_MODELS", "").strip()
    if listed == ANY_MODEL:
        return None
    bundled = {BUNDLED_TARGET, BUNDLED_DRAFT, BUNDLED_HEAD, BUNDLED_EXIT}
    names = {name.strip() for name in listed.split(",")} if listed else bundled
    return frozenset((names | started_with | {NGRAM}) - {""})


def check_allowed(target: str, drafter: str, allowed: frozenset[str] | None) -> None:
    """SpecDecError naming what may be loaded, if `target` or `drafter` is not on the list."""
    if allowed is None:
        return
    for role, name in (("target", target), ("drafter", drafter.removeprefix(LOOKUP_FIRST))):
        if name not in allowed and not (role == "drafter" and early_exit_layers(name)):  # loads no weights
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


def _resident() -> int:
    """This process's resident memory (RSS), in bytes, once the allocator has handed back what it freed."""
    _release_freed_memory()
    return psutil.Process().memory_info().rss


def _release_freed_memory() -> None:
    """Hand the C allocator's free pages back to the system (glibc's malloc_trim). A load makes
    temporaries (fp32 weights before int8 rounding, a converted file's tensors) that glibc keeps for
    reuse once freed; trimmed, the server's resident size is what its models hold."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to hand back this way
        pass


class PairShelf:
    """The server's models: one target per process, shared by every drafter and every session.

    Asking for another drafter loads only that drafter (`ModelPair.with_drafter`), and a drafter
    loaded once is kept for the target's lifetime. Asking for another target drops the old one and
    its drafters before loading the new one, so a server never holds two targets (on a GPU, two
    copies of a large target could run it out of memory).
    """

    def __init__(self, load_target: Callable[[str], ModelPair]) -> None:
        self._load_target = load_target  # target name -> a pair with the n-gram drafter (no model)
        self._lock = threading.Lock()
        self._latest: ModelPair | None = None  # its `loaded` holds every drafter loaded so far
        self._pairs: dict[str, ModelPair] = {}
        # What each load added to this process's resident memory, in bytes, measured before and after
        # it (the target, then each drafter by the name it was asked for): what hosting it costs.
        self._resident_added: dict[str, int] = {}
        # What a drafter that can count its own tensors holds (an early exit: models.exit_files), in
        # bytes: exact, where a resident size read while other sessions run can be some MiB off.
        self._own_bytes: dict[str, int] = {}

    def get(self, target: str, drafter: str) -> ModelPair:
        with self._lock:
            if self._latest is None or self._latest.target.name != target:
                self._drop()
                before = _resident()
                self._latest = self._load_target(target)
                self._after_load()
                self._resident_added[target] = _resident() - before
            if drafter not in self._pairs:
                before = _resident()
                self._pairs[drafter] = self._latest = self._latest.with_drafter(drafter)
                self._after_load()
                name = drafter.removeprefix(LOOKUP_FIRST)
                self._resident_added.setdefault(name, _resident() - before)
                if (own := getattr(self._latest.exit, "own_bytes", None)) is not None:
                    self._own_bytes.setdefault(name, own)
            return self._pairs[drafter]

    @property
    def resident_added(self) -> dict[str, int]:
        """Bytes each load added to the server's resident memory, by model name (a drafter behind
        "ngram+" under its own name: its first load is what counts), the current target's first."""
        with self._lock:
            return dict(self._resident_added)

    @property
    def own_bytes(self) -> dict[str, int]:
        """Bytes of its own tensors, by drafter name, for each loaded drafter that counts them."""
        with self._lock:
            return dict(self._own_bytes)

    def clear(self) -> None:
        """Drop every model: the next request loads afresh."""
        with self._lock:
            self._drop()

    @property
    def target_names(self) -> list[str]:
        """The targets held now (at most one): what a test or the status box can check."""
        with self._lock:
            return [] if self._latest is None else [self._latest.target.name]

    def _drop(self) -> None:
        self._latest = None
        self._pairs.clear()
        self._resident_added.clear()
        self._own_bytes.clear()
        # The loaded models were frozen out of the collector (_after_load); unfreeze them so the
        # dropped target's cycles can be collected, then collect now rather than at some later run.
        gc.unfreeze()
        gc.collect()

    @staticmethod
    def _after_load() -> None:
        # Streamlit collects garbage after every script run, and a full collection walks every object
        # of the loaded models, with the GIL held, during which no reply reaches any browser
        # (docs/LOG.md, "Figures that lived in code comments").
        # Frozen objects are left out of collections until _drop unfreezes them.
        gc.freeze()
