"""Rules for how many tokens to draft, compared without a clock: the target's answers replayed.

    .venv/bin/python experiments/draft_replay.py [--campaign 60] [--draft-cost 0.1]
    SPECDEC_PASS_COSTS=1,1.455,1.52,1.577,1.702,1.758,1.918,1.918,1.924 \\
        .venv/bin/python experiments/draft_replay.py --check

At T = 0 the output is the target's greedy answer whatever the drafter does, and whether a draft
survives depends only on the text before it. So one run per prompt records the answer (the default
drafter, which writes the same tokens as plain decoding), the bundled draft model reads it token by
token (teacher forcing) for its top token and top probability q at every position, and any rule for how
many tokens to draft can then be replayed round by round in arithmetic, as the engine runs them: the
n-gram lookup first, else the draft model while the rule says so, the cap following acceptance
(rounds.next_draft_cap). A round costs the target's pass over its tokens (pass costs in one-token
passes, as kernels.choice times them at load) plus `--draft-cost` plain steps per call of the draft model
(a refused round has called it once). Speed is tokens over cost, the target alone being 1.

The replay is close to the engine, not equal to it: after a wrong draft the engine's draft reads its own
wrong token, the replay the right one (so a doomed round may draft a different number), and where the
engine feeds its draft two tokens in one pass (after a round) int8 or bf16 weights round slightly
differently than over one.
`--check` runs the engine with the pass costs pinned (SPECDEC_PASS_COSTS) beside the replay of the
default rule and prints both's rounds, drafts and kept drafts per held-out set.

Rules replayed (at the default γ and draft threshold; `--lengths` adds the default rule at others),
with each CPU kind's pass costs (those a 2-core Intel Xeon timed at load, before and after MKL's packed
product joined the layouts, kernels.matmul):
  default          the engine's: the product of the draft's top probabilities priced against each
                   draft's cost (core.drafters.stop_thresholds, worth_drafting)
  calibrated       each factor replaced by the share kept at that q, a table fit on campaign answers
  calibrated-first only the first draft's factor calibrated: the draft-or-refuse decision
  rest             after a refused round, one plain step without asking the draft
  oracle           knows how many drafts will survive and drafts the number that pays best in the
                   round, refusing without calling the draft: about the most any rule could give
Held-out sets are only replayed; the calibration table is fit on the first half of the campaign prompts
(index 40,000 on, past every index the training used) and the other half is replayed beside them. The
script also prints how well q ranks the drafts that survive (AUC) against a logistic fit of q, the
draft's second probability and its entropy.

Its answer is written in docs/LOG.md, "2026-12-03 — Rules replayed without a clock: what a draft-length
rule can still win".
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdec.cli.bench import parse_race_lengths  # noqa: E402
from specdec.config import SamplingConfig, Settings  # noqa: E402
from specdec.core.drafters import Draft, NgramDrafter, costs_up_to, stop_thresholds, worth_drafting  # noqa: E402
from specdec.core.rounds import next_draft_cap  # noqa: E402
from specdec.errors import SpecDecError  # noqa: E402
from specdec.models.pair import ModelPair  # noqa: E402
from specdec.models.runs import generate  # noqa: E402
from specdec.paths import HELD_OUT_PROMPT_SETS  # noqa: E402
from specdec.training.campaign_prompts import campaign_prompt  # noqa: E402

# Pass costs for 1 to 9 tokens timed at load on a 2-core Intel Xeon, one process per kernel set: in
# the layouts picked before MKL's packed product was a candidate (rows/packed@2 and @4: the first runs
# of docs/LOG.md's "With the layouts chosen by turns") and with it (rows/mkl@2 and mkl: "MKL's packed
# product").
PASS_COSTS = {"AVX2 kernels": (1.0, 1.455, 1.52, 1.577, 1.702, 1.758, 1.918, 1.918, 1.924),
              "AVX-512 kernels": (1.0, 1.113, 1.332, 1.629, 1.629, 1.629, 1.837, 1.837, 1.837),
              "AVX2 kernels, mkl": (1.0, 1.151, 1.246, 1.262, 1.363, 1.386, 1.511, 1.511, 1.776),
              "AVX-512 kernels, mkl": (1.0, 1.0, 1.028, 1.033, 1.166, 1.168, 1.239, 1.239, 1.522)}
RULES = ("default", "calibrated", "calibrated-first", "rest", "oracle")
GAMMA, DRAFT_THRESHOLD = Settings().gamma, Settings().draft_threshold


@dataclass(frozen=True)
class Answer:
    """The target's greedy answer to one prompt, and what the draft says at each of its positions."""

    kind: str
    token_ids: list[int]  # prompt, then answer
    start: int  # where the answer starts
    draft_top: list[int]  # per answer position: the draft's top token (its greedy draft) there
    draft_q: list[float]  # ... and its probability
    draft_second: list[float]  # ... the second-largest probability
    draft_entropy: list[float]  # ... the entropy of q

    @property
    def answer(self) -> list[int]:
        return self.token_ids[self.start :]

    @cached_property
    def kept(self) -> list[bool]:
        """Per answer position: would the draft's token there be kept (the target's argmax)?"""
        return [top == token for top, token in zip(self.draft_top, self.answer, strict=True)]


def record(pair: ModelPair, prompts: list[tuple[str, str]], max_new_tokens: int) -> list[Answer]:
    settings = Settings(sampling=SamplingConfig(temperature=0.0), max_new_tokens=max_new_tokens)
    answers = []
    for kind, prompt in prompts:
        prompt_ids = pair.encode_prompt(prompt, chat=True, max_new_tokens=max_new_tokens)
        token_ids = generate(pair, prompt_ids, settings, detail=False).token_ids
        token_ids = token_ids if token_ids[: len(prompt_ids)] == prompt_ids else prompt_ids + token_ids
        # Token by token, as the engine feeds its draft: int8 or bf16 weights round differently in one
        # pass over many tokens, enough to flip a near tie. Each row predicts the answer's next token.
        draft = pair.new_drafter().model.cached
        with torch.inference_mode():
            logits = torch.cat([draft.extend(prompt_ids, keep_last=1)]
                               + [draft.extend([token]) for token in token_ids[len(prompt_ids) : -1]])
        q = torch.softmax(logits.float(), dim=-1)
        top2 = q.topk(2, dim=-1)
        entropy = -(q * q.clamp_min(1e-12).log()).sum(-1)
        answers.append(Answer(kind, token_ids, len(prompt_ids), top2.indices[:, 0].tolist(),
                              top2.values[:, 0].tolist(), top2.values[:, 1].tolist(), entropy.tolist()))
        print(f"recorded {kind}: {len(token_ids) - len(prompt_ids)} tokens", file=sys.stderr)
    return answers


def tenth(q: float) -> int:
    """Which tenth of [0, 1] q falls in (q = 1 in the last)."""
    return min(int(q * 10), 9)


def kept_by_tenth(drafts: Iterable[tuple[float, bool]]) -> list[tuple[int, int, float]]:
    """Drafts given as (q, kept), grouped by tenth of q: per tenth, (drafts, kept, sum of q)."""
    cells = [(0, 0, 0.0)] * 10
    for q, kept in drafts:
        n, k, total = cells[tenth(q)]
        cells[tenth(q)] = (n + 1, k + kept, total + q)
    return cells


def calibration_table(answers: list[Answer]) -> list[float]:
    """Per tenth of q: the share of the draft's tokens the target kept (where none fell: the tenth's
    lower edge, which leaves q as it is)."""
    cells = kept_by_tenth((q, kept) for answer in answers
                          for q, kept in zip(answer.draft_q, answer.kept, strict=True))
    return [kept / n if n else i / 10 for i, (n, kept, _) in enumerate(cells)]


def drafts_by_rule(answer: Answer, at: int, k: int, rule: str, thresholds: list[float],
                   calibrated: list[float], costs: Sequence[float], draft_cost: float) -> int:
    """How many of the draft's tokens a round starting at answer position `at` drafts (at most k)."""
    q = answer.draft_q
    if rule == "oracle":  # the best count among those that survive, by tokens per cost in this round
        kept = answer.kept
        survive = next((i for i in range(k) if at + i >= len(kept) or not kept[at + i]), k)
        return max(range(survive + 1), key=lambda m: (m + 1) / (costs[m] + draft_cost * calls(m, k)))
    raw_product, calibrated_product = 1.0, 1.0
    for i in range(min(k, len(q) - at)):
        raw = q[at + i]
        surer = max(raw, calibrated[tenth(raw)])
        raw_product, calibrated_product = raw_product * raw, calibrated_product * surer
        if rule == "calibrated":
            confidence, chance = calibrated_product, surer
        elif rule == "calibrated-first" and i == 0:
            confidence, chance = surer, surer
        else:
            confidence, chance = raw_product, raw
        if not worth_drafting(confidence, chance, thresholds[i:k]):
            return i
    return min(k, len(q) - at)


def calls(drafted: int, k: int, refusal_free: bool = True) -> int:
    """Draft-model calls for a round that drafted `drafted` of at most k: the first call gives the first
    q; every draft but a k-th is fed to get the next one. The oracle refuses without calling."""
    if drafted == 0:
        return 0 if refusal_free else 1
    return drafted if drafted == k else drafted + 1


def replay(answer: Answer, rule: str, costs: tuple[float, ...], draft_cost: float,
           calibrated: list[float], max_new_tokens: int, gamma: int = GAMMA,
           draft_threshold: float = DRAFT_THRESHOLD) -> tuple[int, float, list[tuple[int, int]]]:
    """(tokens, cost in plain steps, per round (drafted, kept)) of the engine's rounds under `rule`, at
    draft length `gamma` and `draft_threshold` (Settings)."""
    lookup = NgramDrafter(0)
    thresholds = stop_thresholds(draft_threshold, costs, gamma)
    costs = costs_up_to(costs, gamma + 1)  # passes over 1 to γ + 1 tokens, as the thresholds price them
    made, cost, cap, rounds, rested = 0, 0.0, gamma, [], False
    while made < len(answer.answer):
        k = min(cap, max_new_tokens - made - 1)
        copied = lookup.continuation(answer.token_ids[: answer.start + made], k) if k > 0 else []
        if copied:
            drafted, called = copied, 0
        elif rule == "rest" and rested:
            drafted, called = [], 0
        else:
            m = drafts_by_rule(answer, made, k, rule, thresholds, calibrated, costs, draft_cost) if k else 0
            drafted, called = answer.draft_top[made : made + m], calls(m, k, rule == "oracle") if k else 0
        rested = rule == "rest" and not copied and not rested and not drafted
        truth = answer.answer[made:]
        kept = next((i for i, (x, y) in enumerate(zip(drafted, truth, strict=False)) if x != y),
                    min(len(drafted), len(truth)))
        cost += costs[len(drafted)] + draft_cost * called
        made += kept + 1
        rounds.append((len(drafted), kept))
        cap = next_draft_cap(cap, Draft(torch.tensor(drafted, dtype=torch.long), torch.empty(0)), kept, gamma)
    return len(answer.answer), cost, rounds


def speeds(answers: list[Answer], rule: str, costs: tuple[float, ...], draft_cost: float,
           calibrated: list[float], max_new_tokens: int, gamma: int = GAMMA,
           draft_threshold: float = DRAFT_THRESHOLD) -> dict[str, float]:
    totals = collections.defaultdict(lambda: [0, 0.0])
    for answer in answers:
        tokens, cost, _ = replay(answer, rule, costs, draft_cost, calibrated, max_new_tokens, gamma,
                                 draft_threshold)
        totals[answer.kind][0] += tokens
        totals[answer.kind][1] += cost
    return {kind: tokens / cost for kind, (tokens, cost) in totals.items()}


def auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """The chance that a kept draft scores above a rejected one (ties aside)."""
    ranks = torch.empty_like(scores)
    ranks[scores.argsort()] = torch.arange(len(scores), dtype=scores.dtype)
    kept = labels.bool()
    n_kept, n_rejected = int(kept.sum()), int((~kept).sum())
    return float((ranks[kept].sum() - n_kept * (n_kept - 1) / 2) / (n_kept * n_rejected))


def features(answers: list[Answer]) -> tuple[torch.Tensor, torch.Tensor]:
    rows = [[q, second, entropy] for a in answers for q, second, entropy in
            zip(a.draft_q, a.draft_second, a.draft_entropy, strict=True)]
    return torch.tensor(rows), torch.tensor([kept for a in answers for kept in a.kept], dtype=torch.float)


def logistic_fit(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    mean, std = x.mean(0), x.std(0)
    weights = torch.zeros(x.shape[1] + 1, requires_grad=True)
    design = torch.cat([(x - mean) / std, torch.ones(len(x), 1)], 1)
    optimizer = torch.optim.LBFGS([weights], max_iter=200, line_search_fn="strong_wolfe")

    def loss() -> torch.Tensor:
        optimizer.zero_grad()
        value = torch.nn.functional.binary_cross_entropy_with_logits(design @ weights, y)
        value.backward()
        return value

    optimizer.step(loss)
    return weights.detach(), mean, std


def check(pair: ModelPair, answers: list[Answer], max_new_tokens: int) -> None:
    """The engine beside the replay of its rule, with the pass costs the engine timed (or was given)."""
    costs = pair.target.pass_costs
    settings = Settings(sampling=SamplingConfig(temperature=0.0), max_new_tokens=max_new_tokens)
    print(f"pass costs: {', '.join(f'{c:.3f}' for c in costs)}")
    print(f"{'set':<12} {'engine: rounds, drafted, kept':>30} {'replay: rounds, drafted, kept':>30}")
    totals = collections.defaultdict(lambda: [0] * 6)
    for answer in answers:
        traces = generate(pair, answer.token_ids[: answer.start], settings, detail=False).rounds
        _, _, rounds = replay(answer, "default", costs, 0.0, [0.0] * 10, max_new_tokens)
        row = totals[answer.kind]
        for i, value in enumerate((len(traces), sum(t.num_drafted for t in traces),
                                   sum(t.num_accepted for t in traces), len(rounds),
                                   sum(d for d, _ in rounds), sum(k for _, k in rounds))):
            row[i] += value
    for kind, row in totals.items():
        print(f"{kind:<12} {str(row[:3]):>30} {str(row[3:]):>30}")


def parse_lengths(text: str) -> list[tuple[int, float]]:
    """"8:0.1,8:0.05" -> [(8, 0.1), (8, 0.05)]: draft lengths γ with their draft thresholds, read as
    bench's --race-lengths reads them (cli.bench.parse_race_lengths), each with its threshold given."""
    message = f"expected γ:threshold pairs, e.g. 8:0.1,8:0.05; got {text!r}"
    try:
        lengths = parse_race_lengths(text)
    except SpecDecError:
        raise argparse.ArgumentTypeError(message) from None
    # The replay prices every draft by the passes.
    if any(threshold is None or priced is not None for _, threshold, priced in lengths):
        raise argparse.ArgumentTypeError(message)
    return [(gamma, threshold) for gamma, threshold, _ in lengths]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaign", type=int, default=60, help="campaign prompts (index 40,000 on)")
    parser.add_argument("--first-index", type=int, default=40_000)
    parser.add_argument("--draft-cost", type=float, default=0.1, help="one draft-model call, in plain steps")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--check", action="store_true", help="the engine beside the replay (held-out sets)")
    parser.add_argument("--lengths", type=parse_lengths, default=[],
                        help="more rows: the default rule at these γ:threshold pairs (e.g. 8:0.1,8:0.05)")
    args = parser.parse_args()
    if args.check and not os.environ.get("SPECDEC_PASS_COSTS"):
        parser.error("--check needs SPECDEC_PASS_COSTS: the engine's prices must not move with the clock")
    pair = ModelPair.load()
    held_out = [(name, prompt) for name, path in HELD_OUT_PROMPT_SETS.items()
                for prompt in json.loads(path.read_text())["prompts"]]
    held_out_answers = record(pair, held_out, args.max_new_tokens)
    if args.check:
        check(pair, held_out_answers, args.max_new_tokens)
        return
    indices = range(args.first_index, args.first_index + args.campaign)
    campaign = record(pair, [campaign_prompt(i) for i in indices], args.max_new_tokens)
    fit, replayed = campaign[0::2], campaign[1::2]
    calibrated = calibration_table(fit)
    print("share kept per tenth of q (fit half): " + ", ".join(f"{share:.2f}" for share in calibrated))
    x_fit, y_fit = features(fit)
    x_test, y_test = features(replayed + held_out_answers)
    weights, mean, std = logistic_fit(x_fit, y_fit)
    fitted = torch.cat([(x_test - mean) / std, torch.ones(len(x_test), 1)], 1) @ weights
    print(f"AUC on the replayed answers: q {auc(x_test[:, 0], y_test):.4f}; q, second probability and "
          f"entropy (logistic, fit half) {auc(fitted, y_test):.4f}")
    for group, answers in (("held-out sets", held_out_answers), ("campaign prompts, replay half", replayed)):
        for cpu, costs in PASS_COSTS.items():
            table = {rule: speeds(answers, rule, costs, args.draft_cost, calibrated, args.max_new_tokens)
                     for rule in RULES}
            for gamma, threshold in args.lengths:
                table[f"default {gamma}:{threshold}"] = speeds(answers, "default", costs, args.draft_cost,
                                                               calibrated, args.max_new_tokens, gamma,
                                                               threshold)
            kinds = list(table["default"])
            print(f"\n{group}, {cpu}, draft call {args.draft_cost} plain steps: speed over the target alone")
            print(f"{'rule':<17} " + " ".join(f"{kind:>10}" for kind in kinds))
            for rule, by_kind in table.items():
                print(f"{rule:<17} " + " ".join(f"{by_kind[kind]:>10.3f}" for kind in kinds))


if __name__ == "__main__":
    main()
