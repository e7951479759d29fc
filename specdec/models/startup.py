"""Where a process's start goes before its first token: importing the libraries, loading the models,
timing the machine (or reading the figures kept for it), and the first token itself. bench's report,
`generate` and the app's status say it, so a slow start is seen for what it is."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from dataclasses import replace as with_changes

from specdec.clock import now
from specdec.config import Settings
from specdec.kernels import choice, kept_timings
from specdec.models.pair import ModelPair
from specdec.models.runs import generate


@dataclass(frozen=True)
class StartupSplit:
    imports: float | None  # seconds to import torch, transformers and the engine (None: not measured)
    loading: float  # loading and checking the models, less the timing
    timing: float  # timing the machine (0 when every figure was read from the cache)
    timing_source: str  # kept_timings.summary(): timed now, or read from the cache and when
    first_token: float | None = None  # from the loaded pair to the first token of a run

    def with_first_token(self, seconds: float) -> StartupSplit:
        return with_changes(self, first_token=seconds)

    def line(self) -> str:
        parts = [f"imports {self.imports:.1f} s"] if self.imports is not None else []
        parts.append(f"loading {self.loading:.1f} s")
        parts.append(f"machine timings {self.timing_source}")
        if self.first_token is not None:
            parts.append(f"first token {self.first_token:.2f} s")
        return "start-up: " + ", ".join(parts)

    def to_dict(self) -> dict:
        return {name: round(value, 3) if isinstance(value, float) else value
                for name, value in asdict(self).items()}


def load_timed(target: str, drafter: str | None, imports: float | None = None
               ) -> tuple[ModelPair, StartupSplit]:
    """ModelPair.load, with where its time went."""
    return timed_load(lambda: ModelPair.load(target, drafter), imports)


def timed_load(load: Callable[[], ModelPair], imports: float | None = None) -> tuple[ModelPair, StartupSplit]:
    """`load()`, with where its time went."""
    records_before, started = len(kept_timings.RECORDS), now()
    pair = load()
    return pair, split_since(records_before, now() - started, imports)


def split_since(records_before: int, load_seconds: float, imports: float | None = None) -> StartupSplit:
    """The split of a load that took `load_seconds`, from the timing records made since `records_before`
    (len(kept_timings.RECORDS) before it started)."""
    records = kept_timings.RECORDS[records_before:]
    timing = sum(record.seconds for record in records)
    return StartupSplit(imports, max(load_seconds - timing, 0.0), timing, kept_timings.summary(records))


def first_token_seconds(pair: ModelPair) -> float:
    """One token of a short prompt, timed: what a first request pays after the load (lazy initialisation
    included). It warms the pair up too."""
    started = now()
    generate(pair, pair.encode_prompt("Hello", chat=False, max_new_tokens=1),
             Settings(max_new_tokens=1), detail=False)
    return now() - started


def forget_machine_timings() -> None:
    """Time this machine afresh at the next load: drop the figures kept for it and those chosen in this
    process (models already loaded keep their layouts until they are loaded again)."""
    kept_timings.forget()
    choice.forget_chosen()


def note_load_seconds(pair: str, seconds: float) -> None:
    """Keep how long loading `pair` took here, for the next start's estimate (kernels.kept_timings)."""
    kept_timings.note_load_seconds(pair, seconds)


def expected_load_seconds(pair: str) -> float | None:
    """The last load of `pair` on this machine, in seconds; None if never measured here."""
    return kept_timings.load_seconds(pair)
