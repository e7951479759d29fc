"""What choice.py timed on this machine, kept on disk, so the next process reads it instead of timing
again.

A layout, a precision and the pass costs are facts of the machine and the model, not of the process:
the CPU (its model name and flags), the cores and threads, the versions of torch and of these kernels,
and the model (its config, dtype and a fingerprint of its weights). Those make the key. A process whose
key matches reads the figures in milliseconds; one whose key differs (another CPU, a new torch, a
changed kernel) times afresh and writes its own entry beside the others.

A timing taken while the machine was busy (other processes keeping more than OTHERS_BUSY_CORES of the
CPUs busy meanwhile) stands for a busy machine, not for this one: it is used by the process that took
it and not kept.
SPECDEC_RETIME=1 (the CLI's --retime) times afresh and replaces what was kept. The entries live in
`machine-timings/` in the cache folder (~/.cache/specdec or $SPECDEC_CACHE), or in $SPECDEC_TIMINGS.
"""

from __future__ import annotations

import ast
import datetime
import functools
import hashlib
import json
import os
import platform
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from specdec.paths import cache_root

# Raise it when what is timed, or how, changes in a way the kernels' source does not show.
TIMING_VERSION = 1
KERNELS = Path(__file__).resolve().parent
# Environment variables that change what a timing finds (held-back instruction sets, a fixed layout).
TIMING_ENVIRONMENT = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS",
                      "SPECDEC_MATMUL")

TIMED_NOW, READ, NOT_KEPT = "timed now", "read from the cache", "timed now, not kept (machine busy)"


@dataclass(frozen=True)
class TimingRecord:
    """One figure's origin, for the app's status and bench's report."""

    what: str  # "layout", "precision", "pass costs up to 10 (rows)", ...
    model: str  # the model's folder name, or its architecture
    source: str  # TIMED_NOW, READ or NOT_KEPT
    timed_at: str  # when it was timed (ISO 8601, UTC, to the second)
    seconds: float  # what timing it took (0 when read)


def _cpu() -> tuple[str, str]:
    """The CPU's model name and its flags, from /proc/cpuinfo ("" where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor(), ""
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    fields = {name.strip(): value.strip() for name, value in fields.items()}
    return fields.get("model name", platform.processor()), fields.get("flags", "")


@functools.cache
def _kernels_version() -> str:
    """A hash of the kernels' code: a changed kernel times afresh. Read through its syntax tree, so a
    comment, a docstring or a line break changed does not throw away every machine's timings."""
    digest = hashlib.sha256()
    for source in sorted(KERNELS.glob("*.py")):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in ast.walk(tree):  # a docstring is the first statement of its body: left out
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                    and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
        digest.update(source.name.encode() + ast.dump(tree).encode())
    return digest.hexdigest()[:12]


def machine_key() -> dict:
    """What a timing depends on, apart from the model."""
    model, flags = _cpu()
    return {
        "cpu": model,
        "flags": hashlib.sha256(flags.encode()).hexdigest()[:12],
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "kernels": _kernels_version(),
        "timing_version": TIMING_VERSION,
        "environment": {name: os.environ[name] for name in TIMING_ENVIRONMENT if name in os.environ},
    }


_FINGERPRINTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def model_key(model: nn.Module) -> str:
    """The model's config, dtype and weights, as a short hash. The weights are sampled (256 values of
    each tensor, evenly spaced) once per model object: enough to tell two checkpoints apart, and
    milliseconds where hashing every byte would take a second."""
    if model not in _FINGERPRINTS:
        digest = hashlib.sha256(getattr(model, "config", None).to_json_string().encode()
                                if hasattr(model, "config") else type(model).__name__.encode())
        digest.update(str(next(model.parameters()).dtype).encode())
        with torch.no_grad():
            for name, tensor in sorted(model.state_dict().items()):
                flat = tensor.detach().reshape(-1)
                sample = flat[:: max(1, flat.numel() // 256)][:256].float().cpu()
                digest.update(name.encode() + str(tuple(tensor.shape)).encode() + sample.numpy().tobytes())
        _FINGERPRINTS[model] = digest.hexdigest()[:16]
    return _FINGERPRINTS[model]


def model_label(model: nn.Module) -> str:
    """A model's name for people: its folder's name, or its class."""
    path = getattr(getattr(model, "config", None), "_name_or_path", "") or ""
    return Path(path).name or type(model).__name__


# Other processes' share of the CPUs during a timing, in cores, above which it is not kept: a timing
# taken beside another busy process prices passes for a machine that is not this one. (Not the load
# average: a minute's mean, it lags a process that just started, and it counts the timing's own threads,
# which alone bring a 2-core machine to its core count.)
OTHERS_BUSY_CORES = 0.3


def cpu_seconds() -> tuple[float, float, float]:
    """(now, CPU seconds every process has used, CPU seconds this process has used), for
    `others_cores` (zeros where /proc/stat cannot be read)."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return 0.0, 0.0, 0.0
    every = (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")  # less idle and iowait
    times = os.times()
    return times.elapsed, every, times.user + times.system


def others_cores(before: tuple[float, float, float]) -> float:
    """How many cores other processes kept busy, on average, since `before` (cpu_seconds())."""
    after = cpu_seconds()
    wall = after[0] - before[0]
    if wall <= 0:
        return 0.0
    return max(0.0, (after[1] - before[1]) - (after[2] - before[2])) / wall


def retime_asked() -> bool:
    return os.environ.get("SPECDEC_RETIME", "").lower() in ("1", "true", "yes")


def folder() -> Path:
    return Path(os.environ.get("SPECDEC_TIMINGS") or cache_root() / "machine-timings")


def _file() -> Path:
    """This machine's entries: one file per machine key."""
    key = json.dumps(machine_key(), sort_keys=True)
    return folder() / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def _read(path: Path) -> dict:
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError):  # none yet, or damaged: timed afresh
        return {}
    return entries if isinstance(entries, dict) else {}


def read(what: str, model: nn.Module) -> tuple[object, str] | None:
    """(the kept figure, when it was timed), or None where nothing is kept for this machine and model."""
    if retime_asked():
        return None
    entry = _get(f"{model_key(model)} {what}")
    if entry is None:
        return None
    value = entry["value"]
    return (tuple(value) if isinstance(value, list) else value), str(entry.get("timed_at", ""))


def write(what: str, model: nn.Module, value, timed_at: str) -> None:
    """Keep a figure for this machine and model."""
    _put(f"{model_key(model)} {what}", {"value": value, "timed_at": timed_at, "model": model_label(model)})


def note_load_seconds(pair: str, seconds: float) -> None:
    """How long loading `pair` (its target and drafter's names) took on this machine, for the next
    start's estimate."""
    _put(f"load {pair}", {"value": round(seconds, 1), "timed_at": now_iso()})


def load_seconds(pair: str) -> float | None:
    """The last load of `pair` on this machine, in seconds (None if never measured here)."""
    entry = _get(f"load {pair}")
    return float(entry["value"]) if entry is not None else None


def _get(name: str) -> dict | None:
    entry = _read(_file()).get("entries", {}).get(name)
    return entry if isinstance(entry, dict) and "value" in entry else None


def _put(name: str, entry: dict) -> None:
    """Merge one entry into this machine's file, replaced atomically, so a reader never sees half of it
    (two writers at once can lose one entry, which is then timed again)."""
    path = _file()
    kept = _read(path)
    entries = kept.get("entries", {}) if isinstance(kept.get("entries"), dict) else {}
    entries[name] = entry
    staging = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, staging = tempfile.mkstemp(dir=path.parent, prefix=".writing-")
        with os.fdopen(handle, "w") as stream:
            json.dump({"machine": machine_key(), "entries": entries}, stream, indent=1)
        os.replace(staging, path)
    except OSError:  # a read-only or full cache: the figures are used, just not kept
        if staging is not None:
            Path(staging).unlink(missing_ok=True)


def forget() -> None:
    """Drop every figure kept for this machine: the next load times afresh (the app's switch)."""
    _file().unlink(missing_ok=True)


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# What this process's figures came from, in the order they were asked for.
RECORDS: list[TimingRecord] = []


def summary(records: list[TimingRecord] | None = None) -> str:
    """One line: were the figures (this process's, or `records`) timed now or read from the cache, and
    when."""
    records = RECORDS if records is None else records
    if not records:
        return "none needed (chosen earlier in this process, fixed by the environment, or not on a CPU)"
    sources = {record.source for record in records}
    timed_at = max(record.timed_at for record in records)
    seconds = sum(record.seconds for record in records)
    if sources == {READ}:
        return f"read from the cache (timed {timed_at.replace('T', ' ').removesuffix('Z')} UTC)"
    if NOT_KEPT in sources:
        return f"timed now in {seconds:.1f} s, not kept: the machine was busy"
    return f"timed now in {seconds:.1f} s" + (", partly read from the cache" if READ in sources else "")
