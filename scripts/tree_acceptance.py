"""Measure what a tree of drafts would buy: per-depth, per-rank acceptance βₖ and the target's pass costs.

    nice .venv/bin/python scripts/tree_acceptance.py [--prompts 3] [--tokens 40] [--write]

For each held-out prompt set and temperature 0 and 1, the fp32 target writes a continuation of a few
prompts (its own law, seeded). One pass of each model over prompt and continuation gives p and q at
every position, and there βₖ, the chance that one of the first k candidates drawn from q without
replacement survives the tree rule (core.tree_rule): at T = 0, whether p's top token is among q's top
k; at T = 1, 1 − the mean over Gumbel-top-k draws of Π (1 − keep chance), the coins integrated out.
βₖ at depth d weighs each position by the chance a chain reached it (the product of β₁ over the d − 1
positions before it). The target's pass cost for 1 to 33 tokens comes from kernels.choice (kept per
machine). From both: the expected tokens per pass and per unit of cost of the best tree of each size
(core.tree_shape) against the best chain. --write keeps βₖ in assets/tree_acceptance.json, which
Settings.tree = auto reads.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from specdec.config import SamplingConfig, Settings  # noqa: E402
from specdec.core.cached_model import CachedModel  # noqa: E402
from specdec.core.rounds import target_only_steps  # noqa: E402
from specdec.core.sampling import warp_probs  # noqa: E402
from specdec.core.tree_rule import gumbel_top_k, judged_in_turn  # noqa: E402
from specdec.core.tree_shape import MEASURED_ACCEPTANCE, best_chain, plan  # noqa: E402
from specdec.kernels.choice import pass_costs  # noqa: E402
from specdec.models.pair import ModelPair  # noqa: E402
from specdec.paths import BUNDLED_DRAFT, HELD_OUT_PROMPT_SETS  # noqa: E402

RANKS, DEPTHS, DRAWS, MAX_NODES = 8, 6, 16, 32


def position_betas(p: torch.Tensor, q: torch.Tensor, greedy: bool, generator: torch.Generator) -> list[float]:
    """βₖ for k = 1..RANKS at one position, from p and q (vocab,)."""
    if greedy:
        top = int(p.argmax())
        ranked = q.topk(RANKS).indices.tolist()
        return [float(top in ranked[:k]) for k in range(1, RANKS + 1)]
    all_rejected = torch.zeros(RANKS, dtype=torch.float64)
    for _ in range(DRAWS):
        candidates = gumbel_top_k(q, RANKS, generator)
        steps, _ = judged_in_turn(candidates, q, p)
        rejected, row = 1.0, []
        for step in steps:
            rejected *= 1 - float(step.keep_chance)
            row.append(rejected)
        row += [rejected] * (RANKS - len(row))  # q had fewer tokens: no more candidates
        all_rejected += torch.tensor(row, dtype=torch.float64)
    return (1 - all_rejected / DRAWS).tolist()


def by_depth(betas: list[list[float]]) -> list[list[float]]:
    """βₖ at depths 1..DEPTHS of one continuation's positions: depth d weighs position j by the chance a
    chain reached it, the product of β₁ over positions j − d + 1 .. j − 1 -> (DEPTHS, RANKS) sums with
    their weights, as (weighted sums, weight totals)."""
    sums, weights = [[0.0] * RANKS for _ in range(DEPTHS)], [0.0] * DEPTHS
    for depth in range(1, DEPTHS + 1):
        for j in range(depth - 1, len(betas)):
            weight = 1.0
            for i in range(j - depth + 1, j):
                weight *= betas[i][0]
            weights[depth - 1] += weight
            for k in range(RANKS):
                sums[depth - 1][k] += weight * betas[j][k]
    return sums, weights


def measure(pair: ModelPair, temperature: float, prompts: int, tokens: int) -> dict:
    sampling = SamplingConfig(temperature=temperature)
    vocab = pair.target.vocab_size
    generator = torch.Generator().manual_seed(0)
    pooled_sums, pooled_weights, kinds = [[0.0] * RANKS for _ in range(DEPTHS)], [0.0] * DEPTHS, {}
    for kind, path in HELD_OUT_PROMPT_SETS.items():
        sums, weights = [[0.0] * RANKS for _ in range(DEPTHS)], [0.0] * DEPTHS
        for index, prompt in enumerate(json.loads(path.read_text())["prompts"][:prompts]):
            ids = pair.encode_prompt(prompt, chat=True, max_new_tokens=tokens)
            steps = target_only_steps(pair.new_target(), ids, sampling, torch.Generator().manual_seed(index),
                                      tokens, pair.stop_token_ids)
            text = ids + [s.token for s in steps]
            start = len(ids) - 1  # the logits at position start predict the first new token
            p = warp_probs(CachedModel(pair.target.model, vocab).extend(text[:-1])[start:], sampling)
            draft = CachedModel(pair.draft.model, vocab, pair.draft.reduced_head)
            q = warp_probs(draft.extend(text[:-1])[start:], sampling)
            betas = [position_betas(p[j].cpu(), q[j].cpu(), sampling.greedy, generator)
                     for j in range(len(p))]
            s, w = by_depth(betas)
            for d in range(DEPTHS):
                weights[d] += w[d]
                pooled_weights[d] += w[d]
                for k in range(RANKS):
                    sums[d][k] += s[d][k]
                    pooled_sums[d][k] += s[d][k]
        kinds[kind] = [v / max(weights[0], 1e-12) for v in sums[0]]
    pooled = [[v / max(pooled_weights[d], 1e-12) for v in pooled_sums[d]] for d in range(DEPTHS)]
    return {"by_kind_depth_1": kinds, "by_depth": pooled}


def row(values: list[float]) -> str:
    return " ".join(f"{v:5.2f}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=3, help="prompts per held-out set")
    parser.add_argument("--tokens", type=int, default=40, help="tokens the target writes per prompt")
    parser.add_argument("--write", action="store_true", help=f"keep βₖ in {MEASURED_ACCEPTANCE}")
    args = parser.parse_args()
    began = time.time()
    pair = ModelPair.load(drafter=BUNDLED_DRAFT)
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in lscpu if line.startswith("Model name")), "?")
    print(f"target {pair.target.describe()}; draft {pair.draft.name}; CPU {cpu}")
    costs = pass_costs(pair.target.model, MAX_NODES + 1)
    print("pass cost, 1..33 tokens, in one-token passes:", row(costs))
    step_price = Settings().draft_threshold
    results = {}
    for temperature in (0.0, 1.0):
        results[temperature] = measured = measure(pair, temperature, args.prompts, args.tokens)
        print(f"\nT = {temperature:g}: beta_k, k = 1..{RANKS}, depth 1, by kind")
        for kind, betas in measured["by_kind_depth_1"].items():
            print(f"  {kind:<11} {row(betas)}")
        print("  pooled, by depth")
        for depth, betas in enumerate(measured["by_depth"], start=1):
            print(f"  depth {depth:<5} {row(betas)}")
        acceptance = measured["by_depth"]
        chain = best_chain(acceptance, costs, step_price, 12)
        print(f"  best chain: {len(chain.shape)} drafts, {1 + chain.expected_accepted:.2f} tokens/pass, "
              f"{chain.tokens_per_cost:.3f} tokens per one-token pass of cost")
        print("  nodes  tree tok/pass  tree tok/cost  chain tok/pass  chain tok/cost")
        for size in (1, 2, 3, 4, 6, 8, 10, 12, 16, 20, 24, 32):
            tree = plan(acceptance, size, costs, step_price, DEPTHS)
            line = plan([[r[0]] for r in acceptance], size, costs, step_price, DEPTHS)
            print(f"  {size:>5}  {1 + tree.expected_accepted:13.2f}  {tree.tokens_per_cost:13.3f}  "
                  f"{1 + line.expected_accepted:14.2f}  {line.tokens_per_cost:14.3f}")
    if args.write:
        MEASURED_ACCEPTANCE.write_text(json.dumps({
            "what": "beta_k per depth (rows) and rank k (columns): scripts/tree_acceptance.py",
            "draft": pair.draft.name, "cpu": cpu, "prompts_per_set": args.prompts, "tokens": args.tokens,
            "acceptance": {f"{t:g}": [[round(v, 4) for v in r] for r in m["by_depth"]]
                           for t, m in results.items()},
        }, indent=1) + "\n")
        print(f"\nwrote {MEASURED_ACCEPTANCE}")
    print(f"\n{time.time() - began:.0f} s")


if __name__ == "__main__":
    main()
