"""One run, stepped by hand: the object a browser session holds for the round-by-round view.

No Streamlit here. The loaded pair is shared by every session of the process, so each use of the
models (advancing the round generator) happens under one process-wide lock; everything else a
Stepper holds (generator, caches, traces) belongs to its session alone.
"""

from __future__ import annotations

import csv
import io
import itertools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from specdec.config import ServerLimits, Settings
from specdec.core.metrics import summarize
from specdec.core.records import RoundTrace
from specdec.errors import SpecDecError, is_out_of_memory, out_of_memory_message
from specdec.models.loading import free_device_memory
from specdec.models.pair import ModelPair
from specdec.models.runs import RunModels, rounds
from specdec.serving.lock import MODEL_LOCK, ModelLock, held, locked_steps
from specdec.views.tokens import token_label

# Where an emitted token came from (the output line is coloured by this).
ACCEPTED, RESAMPLED, BONUS = "accepted", "resampled", "bonus"


@dataclass(frozen=True)
class Counters:
    """The running totals shown above the round view (for rounds 0..shown)."""

    rounds: int
    target_passes: int  # one verification pass per round
    tokens_emitted: int
    drafted: int
    accepted: int
    acceptance_rate: float  # accepted / drafted
    tokens_per_pass: float


@dataclass(frozen=True)
class OutputToken:
    token_id: int
    label: str
    origin: str  # ACCEPTED, RESAMPLED or BONUS
    round_index: int
    detail: str  # a one-line explanation, for a hover


class LiveRuns:
    """The runs of one server whose KV caches are held, least recently stepped first: the cap on the
    sessions' cache memory. Past `limit`, the run stepped least recently drops its caches (an idle
    student's go first); if its student steps again, the caches are rebuilt by replaying its rounds.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._runs: OrderedDict[int, weakref.ref] = OrderedDict()  # id(run) -> run, oldest first

    def touch(self, run: Stepper) -> None:
        """`run` is about to use its caches: it becomes the most recent, and the oldest runs past the
        limit drop theirs."""
        with self._lock:
            self._runs.pop(id(run), None)
            self._runs[id(run)] = weakref.ref(run)
            for key in list(self._runs)[: max(0, len(self._runs) - self.limit)]:
                if (oldest := self._runs.pop(key)()) is not None:
                    oldest.drop_caches()

    def holding(self) -> int:
        """How many runs may hold caches now (those not yet collected)."""
        with self._lock:
            return sum(ref() is not None for ref in self._runs.values())


class Stepper:
    """Holds one run's round generator and the traces so far; step forward, back, reset.

    `shown` is the index of the round on screen (-1 before the first step). Stepping forward
    replays a round already computed if the view went back, and only otherwise runs the models.
    """

    def __init__(
        self,
        pair: ModelPair,
        prompt_ids: list[int],
        settings: Settings,
        lock: ModelLock | threading.Lock = MODEL_LOCK,
        prefill_chunk: int = ServerLimits.prefill_chunk,
        live_runs: LiveRuns | None = None,
    ):
        self.pair = pair
        self.prompt_ids = list(prompt_ids)
        self.settings = settings
        self.lock = lock
        self.prefill_chunk = prefill_chunk  # prompt tokens per locked pass (chunked prefill)
        self.live_runs = live_runs  # the server's cap on runs holding caches (None: no cap)
        self._labels: dict[int, str] = {}
        self.reset()

    def reset(self) -> None:
        """Back to before the first round, with fresh caches and a fresh generator (same seed)."""
        self._rounds = None  # created on the first step, so resetting costs nothing
        self.traces: list[RoundTrace] = []
        self.shown = -1
        self.finished = False

    def drop_caches(self) -> None:
        """Free this run's KV caches (the round generator holds them), keeping its traces. The next
        step reads the prompt again and replays the rounds it has: the same seed gives the same rounds."""
        self._rounds = None

    @property
    def prompt_read(self) -> bool:
        """Whether both models hold the prompt already (see read_prompt)."""
        return self._rounds is not None

    @property
    def current(self) -> RoundTrace | None:
        return self.traces[self.shown] if self.shown >= 0 else None

    @property
    def at_end(self) -> bool:
        """True when no further round exists: generation stopped and the last round is shown."""
        return self.finished and self.shown == len(self.traces) - 1

    def step(self, on_wait: Callable[[int], None] | None = None) -> RoundTrace | None:
        """Show the next round (computing it if needed); None once generation has finished.

        Each use of the models holds the shared lock: the prompt goes in chunk by chunk (the lock
        is released between chunks, so a long prompt delays other sessions by one chunk at most),
        then one round. `on_wait(requests ahead)` is told while this session waits its turn.
        """
        if self.shown < len(self.traces) - 1:
            self.shown += 1
            return self.current
        if self.finished:
            return None
        if self.live_runs is not None:
            self.live_runs.touch(self)
        try:
            while True:
                for _ in self.read_prompt(on_wait):  # a no-op once the prompt has been read
                    pass
                with held(self.lock, on_wait):
                    if (generator := self._rounds) is not None:  # None: dropped by the cap meanwhile
                        trace = next(generator, None)
                        break
        except (MemoryError, RuntimeError) as error:  # torch.OutOfMemoryError is a RuntimeError
            if not is_out_of_memory(error):
                raise
            self.drop_caches()
            free_device_memory()
            raise SpecDecError(out_of_memory_message(error, "running a round")) from error
        if trace is None:
            self.finished = True
            return None
        self.traces.append(trace)
        self.shown = len(self.traces) - 1
        if sum(len(t.emitted_tokens) for t in self.traces) >= self.settings.max_new_tokens or (
            trace.emitted_tokens and trace.emitted_tokens[-1] in self.pair.stop_token_ids
        ):
            self.finished = True  # the generator would end here; say so without another call
        return trace

    def read_prompt(self, on_wait: Callable[[int], None] | None = None) -> Iterator[float]:
        """Feed the prompt to both models, chunk by chunk, each chunk under the lock; yields the
        fraction read so far. Needed before the first round (and again after a reset); a page can
        do it when the prompt is set, so that Step then only runs a round."""
        if self._rounds is not None:
            return
        models = RunModels.of(self.pair)
        for read, _ in locked_steps(models.prefill(self.prompt_ids, self.prefill_chunk), self.lock, on_wait):
            yield read
        generator = rounds(self.pair, self.prompt_ids, self.settings, models)
        # After drop_caches: replay the rounds already shown, to reach the caches they left.
        replayed = locked_steps(itertools.islice(generator, len(self.traces)), self.lock, on_wait)
        for (trace, _), shown in zip(replayed if self.traces else (), self.traces, strict=False):
            if trace.emitted_tokens != shown.emitted_tokens:
                self.reset()
                raise SpecDecError("this run's caches were freed for other sessions, and replaying its "
                                   "rounds gave other tokens on this device: press Reset to start again")
        self._rounds = generator

    def back(self) -> None:
        self.shown = max(-1, self.shown - 1)

    def show_round(self, index: int) -> None:
        """Jump to a round already computed (the timeline's click), as Back does, without running anything."""
        if 0 <= index < len(self.traces):
            self.shown = index

    def labels_for_all(self) -> dict[int, str]:
        """Labels of every drafted and added token so far (the timeline's tooltips)."""
        ids = {t for trace in self.traces for t in (*trace.drafted_tokens, trace.next_token)}
        return {token_id: self.label(token_id) for token_id in ids}

    # -- what the page shows ------------------------------------------------------------------

    def label(self, token_id: int) -> str:
        if token_id not in self._labels:
            self._labels[token_id] = token_label(self.pair, token_id)
        return self._labels[token_id]

    def labels_for(self, trace: RoundTrace) -> dict[int, str]:
        """Labels of every token a round's charts name."""
        ids = {*trace.drafted_tokens, trace.next_token, *trace.emitted_tokens}
        for position in trace.positions:
            ids.update(position.token_ids)
        if trace.tree is not None:  # every node, and the tokens each sibling test shows
            ids.update(trace.tree.tokens)
            for record in trace.tree.siblings:
                for shown in (*(record.target_probs or ()), *(record.draft_probs or ()), record.residual):
                    ids.update(token for token, _ in shown or ())
        return {token_id: self.label(token_id) for token_id in ids}

    def counters(self, upto: int | None = None) -> Counters:
        """Totals over rounds 0..upto (default: the shown round)."""
        shown = self.traces[: (self.shown if upto is None else upto) + 1]
        metrics = summarize(shown)
        return Counters(
            rounds=metrics.rounds,
            target_passes=metrics.rounds,
            tokens_emitted=metrics.tokens_emitted,
            drafted=metrics.drafted,
            accepted=metrics.accepted,
            acceptance_rate=metrics.acceptance_rate,
            tokens_per_pass=metrics.tokens_per_pass,
        )

    def output_tokens(self, upto: int | None = None) -> list[OutputToken]:
        """Every token emitted by rounds 0..upto (default: the shown round), with its origin."""
        last = self.shown if upto is None else upto
        out = []
        for trace in self.traces[: last + 1]:
            for i, token in enumerate(trace.emitted_tokens):
                if i < trace.num_accepted:
                    origin = ACCEPTED
                    detail = (
                        f"round {trace.index + 1}: draft {i + 1} accepted "
                        f"(q={trace.draft_token_probs[i]:.3f}, p={trace.target_token_probs[i]:.3f})"
                    )
                elif trace.is_bonus:
                    origin, detail = BONUS, f"round {trace.index + 1}: bonus token drawn from p"
                else:
                    origin = RESAMPLED
                    detail = f"round {trace.index + 1}: drawn from the residual after a rejection"
                out.append(OutputToken(token, self.label(token), origin, trace.index, detail))
        return out

    def text(self, upto: int | None = None) -> str:
        """The text emitted by rounds 0..upto (default: the shown round)."""
        last = self.shown if upto is None else upto
        return self.pair.decode([t for trace in self.traces[: last + 1] for t in trace.emitted_tokens])

    # -- export --------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """Everything computed so far, with token labels so the file reads on its own."""
        labels = {}
        for trace in self.traces:
            labels.update(self.labels_for(trace))
        sampling = self.settings.sampling
        return {
            "target": self.pair.target.name,
            "drafter": self.pair.drafter_name,
            "settings": {
                "gamma": self.settings.gamma,  # the cap; each round's k is its len(drafted_tokens)
                "temperature": sampling.temperature,
                "top_k": sampling.top_k,
                "top_p": sampling.top_p,
                "max_new_tokens": self.settings.max_new_tokens,
                "seed": self.settings.seed,
                "adaptive": self.settings.adaptive,
                "draft_threshold": self.settings.draft_threshold,
            },
            "prompt_ids": self.prompt_ids,
            "token_labels": {str(k): v for k, v in sorted(labels.items())},
            "rounds": [trace.to_dict() for trace in self.traces],
            "metrics": summarize(self.traces).to_dict(),
            "text": self.pair.decode([t for trace in self.traces for t in trace.emitted_tokens]),
        }

    def to_csv(self) -> str:
        """One row per round computed so far; the rule's own test too (sample-and-compare's draws from
        p, typical acceptance's thresholds), empty where the rule has none."""
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow([
            "round", "context_length", "drafted", "num_drafted", "num_accepted", "next_token",
            "next_token_origin", "emitted", "accept_probs", "uniforms", "rule", "target_draws",
            "thresholds", "draft_seconds", "verify_seconds",
        ])
        for t in self.traces:
            writer.writerow([
                t.index + 1, t.context_length, " ".join(self.label(x) for x in t.drafted_tokens),
                t.num_drafted, t.num_accepted, self.label(t.next_token), BONUS if t.is_bonus else RESAMPLED,
                " ".join(self.label(x) for x in t.emitted_tokens),
                " ".join(f"{a:.4f}" for a in t.accept_probs),
                "" if t.uniforms is None else " ".join(f"{u:.4f}" for u in t.uniforms),
                t.rule, "" if t.target_draws is None else " ".join(self.label(x) for x in t.target_draws),
                "" if t.thresholds is None else " ".join(f"{h:.4f}" for h in t.thresholds),
                f"{t.draft_seconds:.6f}", f"{t.verify_seconds:.6f}",
            ])
        return buffer.getvalue()
