"""A run's figures in the words vLLM, llama.cpp and SGLang print, and what each maps to here.

The engines count the same rounds differently, and their names invite misreading:
- vLLM's "Avg Draft acceptance rate" is accepted / drafted. Drafts after the first rejection were
  never tested, so this is lower than α (accepted / tested), the paper's per-token acceptance.
- vLLM's "Mean acceptance length" is 1 + accepted / drafts: it counts the token every verification
  pass adds (the correction or the bonus). Its per-position rates are accepted at position i over all
  drafts, not over the drafts that reached position i.
- llama.cpp's server prints "draft acceptance rate = a / g" with g the tokens the draft generated:
  the same accepted / drafted as vLLM's.
- SGLang's "accept len" is the tokens a verification pass emitted, bonus included: tokens per pass.
A vLLM or llama.cpp "draft" is a step that proposed at least one token; a round where n-gram lookup
found nothing is a plain target step there, and counts in none of their figures.

The lines follow the engines' format strings (vLLM's SpecDecodingLogging.log, llama.cpp's
server_slot::print_timings and common_speculative_print_stats, SGLang's decode-batch log).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specdec.core.records import RoundTrace

VLLM, LLAMACPP, SGLANG = "vllm", "llamacpp", "sglang"
STYLES = (VLLM, LLAMACPP, SGLANG)


@dataclass(frozen=True)
class EngineCounts:
    """The counters the engines keep, read off a run's rounds."""

    passes: int  # target verification passes (every round is one)
    drafts: int  # rounds that proposed at least one token (vLLM num_drafts, llama.cpp #gen drafts)
    drafts_with_an_accept: int  # llama.cpp #acc drafts
    drafted: int  # tokens proposed (vLLM Drafted, llama.cpp "generated")
    accepted: int  # drafted tokens kept
    tested: int  # drafted tokens that faced the test (up to the first rejection)
    emitted: int  # tokens the run produced: accepted + one per pass
    accepted_at: list[int]  # per position i: drafts that kept a token there
    seconds: float

    @property
    def alpha(self) -> float:
        return _ratio(self.accepted, self.tested)

    @property
    def acceptance_rate(self) -> float:
        """accepted / drafted: what vLLM and llama.cpp call the acceptance rate."""
        return _ratio(self.accepted, self.drafted)

    @property
    def mean_acceptance_length(self) -> float:
        """vLLM: 1 + accepted / drafts (the 1 is the token each pass adds)."""
        return 1.0 + _ratio(self.accepted, self.drafts) if self.drafts else 0.0

    @property
    def per_position(self) -> list[float]:
        """vLLM: kept at position i / all drafts (unconditional)."""
        return [_ratio(kept, self.drafts) for kept in self.accepted_at]

    @property
    def tokens_per_pass(self) -> float:
        """SGLang's accept len."""
        return _ratio(self.emitted, self.passes)


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0


def engine_counts(traces: Sequence[RoundTrace], seconds: float) -> EngineCounts:
    width = max((t.num_drafted for t in traces), default=0)
    accepted_at = [sum(t.num_accepted > i for t in traces) for i in range(width)]
    return EngineCounts(
        passes=len(traces),
        drafts=sum(t.num_drafted > 0 for t in traces),
        drafts_with_an_accept=sum(t.num_accepted > 0 for t in traces),
        drafted=sum(t.num_drafted for t in traces),
        accepted=sum(t.num_accepted for t in traces),
        tested=sum(t.num_tested for t in traces),
        emitted=sum(len(t.emitted_tokens) for t in traces),
        accepted_at=accepted_at,
        seconds=seconds,
    )


def vllm_line(c: EngineCounts) -> str:
    rates = ", ".join(f"{p:.3f}" for p in c.per_position)
    return (
        "SpecDecoding metrics: "
        f"Mean acceptance length: {c.mean_acceptance_length:.2f}, "
        f"Accepted throughput: {_ratio(c.accepted, c.seconds):.2f} tokens/s, "
        f"Drafted throughput: {_ratio(c.drafted, c.seconds):.2f} tokens/s, "
        f"Accepted: {c.accepted} tokens, "
        f"Drafted: {c.drafted} tokens, "
        f"Per-position acceptance rate: {rates}, "
        f"Avg Draft acceptance rate: {100 * c.acceptance_rate:.1f}%"
    )


def llamacpp_lines(c: EngineCounts) -> str:
    return (
        f"draft acceptance rate = {c.acceptance_rate:0.5f} "
        f"({c.accepted:5d} accepted / {c.drafted:5d} generated)\n"
        f"statistics draft: #calls(b,g,a) = 1 {c.passes} {c.passes}, #gen drafts = {c.drafts}, "
        f"#acc drafts = {c.drafts_with_an_accept}, #gen tokens = {c.drafted}, #acc tokens = {c.accepted}"
    )


def sglang_line(c: EngineCounts) -> str:
    return (
        f"Decode batch. #running-req: 1, accept len: {c.tokens_per_pass:.2f}, "
        f"gen throughput (token/s): {_ratio(c.emitted, c.seconds):.2f}"
    )


def engine_summary(style: str, traces: Sequence[RoundTrace], seconds: float) -> str:
    """The run's summary as `style`'s engine would log it."""
    lines = {VLLM: vllm_line, LLAMACPP: llamacpp_lines, SGLANG: sglang_line}
    return lines[style](engine_counts(traces, seconds))


@dataclass(frozen=True)
class Translation:
    engine: str
    figure: str  # the engine's name for it
    value: str
    formula: str
    here: str  # what it is in this app's words, with this run's value


def translations(c: EngineCounts) -> list[Translation]:
    """Each engine figure, how it is computed, and the app's figure it corresponds to."""
    alpha = f"α = accepted / tested = {c.accepted} / {c.tested} = {c.alpha:.3f}"
    return [
        Translation("vLLM", "Avg Draft acceptance rate", f"{100 * c.acceptance_rate:.1f}%",
                    f"accepted / drafted = {c.accepted} / {c.drafted}",
                    f"the acceptance rate, not α: {alpha}"),
        Translation("vLLM", "Mean acceptance length", f"{c.mean_acceptance_length:.2f}",
                    f"1 + accepted / drafts = 1 + {c.accepted} / {c.drafts}",
                    f"tokens per pass over the rounds that drafted (the 1 is the correction or bonus); "
                    f"over all {c.passes} passes: {c.tokens_per_pass:.2f}"),
        Translation("vLLM", "Per-position acceptance rate",
                    ", ".join(f"{p:.3f}" for p in c.per_position),
                    "kept at position i / all drafts",
                    "the chance a draft keeps i + 1 tokens or more; the app's per-position figure is "
                    "conditional on reaching position i"),
        Translation("llama.cpp", "draft acceptance rate (a accepted / g generated)",
                    f"{c.acceptance_rate:.5f}", f"{c.accepted} / {c.drafted}",
                    f"the acceptance rate again, not α ({c.alpha:.3f})"),
        Translation("llama.cpp", "#gen drafts / #acc drafts", f"{c.drafts} / {c.drafts_with_an_accept}",
                    "rounds that drafted / rounds that kept at least one draft",
                    f"{c.passes} target passes in all"),
        Translation("SGLang", "accept len", f"{c.tokens_per_pass:.2f}",
                    f"tokens emitted / verification passes = {c.emitted} / {c.passes}",
                    "tokens per pass (bonus and correction included)"),
    ]


@dataclass(frozen=True)
class TrapQuestion:
    question: str
    options: list[str]
    answer: int  # index into options
    explanation: str


def trap_questions(c: EngineCounts) -> list[TrapQuestion]:
    """The two misreadings engine users report, asked with this run's own numbers."""
    rate, length = 100 * c.acceptance_rate, c.mean_acceptance_length
    return [
        TrapQuestion(
            f"vLLM logs “Avg Draft acceptance rate: {rate:.1f}%” for this run. What is α, the per-token "
            "acceptance that the speed-up formula takes?",
            [f"{c.acceptance_rate:.3f}: the same number", f"{c.alpha:.3f}", f"{1 - c.acceptance_rate:.3f}"],
            1,
            f"α = accepted / tested = {c.accepted} / {c.tested}. vLLM divides by every drafted token "
            f"({c.drafted}), including the {c.drafted - c.tested} that came after a rejection and were "
            "never tested, so its rate is lower than α whenever a draft is rejected early.",
        ),
        TrapQuestion(
            f"vLLM logs “Mean acceptance length: {length:.2f}”. How many drafted tokens did a round that "
            "drafted keep, on average?",
            [f"{length:.2f}", f"{length - 1:.2f}", f"{length + 1:.2f}"],
            1,
            f"The mean acceptance length is 1 + accepted / drafts = 1 + {c.accepted} / {c.drafts}: the 1 is "
            "the token every verification pass adds (the correction at a rejection, or the bonus), which "
            "no draft proposed.",
        ),
    ]
