"""Model names checked before any weight loads (no torch here): a mistyped name is refused in well
under a second, not after the target has loaded and the machine has been timed.

A name is a bundled name, a local folder, or a Hugging Face id (`org/name`). A drafter is also "ngram",
"early:L" (the target's own first L layers: core.early_exit), or "ngram+" before any of those but "ngram".
"""

from __future__ import annotations

import functools
import os
import re
import socket
from pathlib import Path

from specdec.errors import SpecDecError
from specdec.paths import BUNDLED_DRAFT, BUNDLED_EXIT, BUNDLED_HEAD, BUNDLED_TARGET

NGRAM = "ngram"
LOOKUP_FIRST = "ngram+"  # "ngram+<draft model>": copy when the text repeats itself, else ask the model
BUNDLED_PREFIX = "bundled:"
BUNDLED_MODELS = (BUNDLED_TARGET, BUNDLED_DRAFT)
BUNDLED_DRAFTERS = (BUNDLED_DRAFT, BUNDLED_HEAD, BUNDLED_EXIT)
EARLY_EXIT = "early:"  # "early:L": the target's first L layers, then its own norm and head, untrained
# Hugging Face's rule for a repository id: letters, digits, "-", "_", "."; at most one "/".
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")


@functools.cache
def hub_reachable() -> bool:
    """Whether the Hugging Face hub answers (asked once per process; HF_HUB_OFFLINE=1 means no)."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False
    try:
        socket.create_connection(("huggingface.co", 443), timeout=3).close()
    except OSError:
        return False
    return True


def _in_local_hub_cache(model_id: str) -> bool:
    """Whether a Hugging Face id has a snapshot in this machine's cache (HF_HUB_CACHE, HF_HOME)."""
    from huggingface_hub.constants import HF_HUB_CACHE  # light: no torch, no network

    return (Path(HF_HUB_CACHE) / f"models--{model_id.replace('/', '--')}" / "snapshots").is_dir()


def check_model_name(name: str, role: str = "model") -> None:
    """SpecDecError with one line if `name` cannot be a loadable model: a bundled name that is not
    shipped, a folder that does not exist (or is a file), a malformed id, or an id that is neither in
    the local cache nor reachable. `role` ("target", "draft model") words the message."""
    bundled = BUNDLED_DRAFTERS + (BUNDLED_TARGET,) if role != "target" else BUNDLED_MODELS
    path = Path(name).expanduser()
    if name.startswith(BUNDLED_PREFIX):
        shipped = ", ".join(bundled)
        problem = None if name in bundled else f"no such bundled model; the bundled ones: {shipped}"
    elif path.exists():
        problem = None if path.is_dir() else "it is a file: give the model's folder"
    elif path.is_absolute() or name.startswith((".", "~")) or name.count("/") > 1 or "\\" in name:
        problem = "no such folder"
    elif not HUB_ID.fullmatch(name):
        problem = "it is not a bundled name, a folder here or a Hugging Face id (org/name)"
    elif not hub_reachable() and not _in_local_hub_cache(name):
        problem = "not a folder here, not in the local Hugging Face cache, and the hub cannot be reached"
    else:
        problem = None
    if problem:
        raise SpecDecError(f"could not load model '{name}' (the {role}): {problem}")


def early_exit_layers(name: str) -> int | None:
    """"early:L" -> L; None for any other name. SpecDecError if what follows "early:" is not a whole
    number of at least 1 (whether the target has that many layers is checked when it has loaded)."""
    if not name.startswith(EARLY_EXIT):
        return None
    layers = name.removeprefix(EARLY_EXIT)
    if not layers.isdigit() or int(layers) < 1:
        raise SpecDecError(f"'{name}': early exit takes a number of the target's layers, at least 1 "
                           f"(for example {EARLY_EXIT}4)")
    return int(layers)


def check_drafter_name(drafter: str) -> None:
    """check_model_name for a drafter: "ngram", "early:L", or a model or head name, with "ngram+"
    before it or not."""
    if drafter == NGRAM:
        return
    name = drafter.removeprefix(LOOKUP_FIRST)
    if not name.strip():
        raise SpecDecError(f"'{drafter}' names no drafter after '{LOOKUP_FIRST}': add a draft model's name")
    if early_exit_layers(name) is None:
        check_model_name(name, "draft model")


def check_pair_names(target: str, drafter: str | None) -> None:
    """Both names of a pair, before anything loads."""
    if not target.strip():
        raise SpecDecError("the target model name is empty: give a bundled name, Hugging Face id or folder")
    check_model_name(target, "target")
    if drafter is not None:
        check_drafter_name(drafter)
