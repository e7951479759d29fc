"""What limits the feature head: what it reads, or its size? (EAGLE-3 reads low, middle and high layers.)

    .venv/bin/python experiments/head_layers.py [--shards 16] [--layers 3,16] [--steps 300]
        [--arms "last layer,+ layers,+ a decoder layer"] [--work-root .cache/head-layers]

The shipped head reads the target's last hidden state through two decoder layers. This compares, from
the shipped head, runs of training alike (the same batches, negatives, steps and learning rate: the
shipped recipe's, but 100 warm-up steps and half of each step's answers code) on the campaign's first
`--shards` shards of 64 answers, each arm a change that leaves the head's drafts as they are at step 0:
- "last layer": the head as it is, trained on (the control);
- "+ layers": also reading the target's hidden states after decoder layers `--layers` (each
  RMS-normalised, projected by a new matrix that starts at zero and added to its input where the
  target has read the position: core.feature_head);
- "+ a decoder layer": a third decoder layer after its two, whose output projections start at zero (the
  layer adds nothing to the residual stream until trained);
- "greedy answers": the head as it is, trained on the target's greedy answers to the same prompts
  instead of its answers sampled at temperature 1 (T = 0 drafting meets greedy text: is that the text
  to learn from?): the greedy campaign's first `--shards` shards (`python -m specdec campaign --greedy
  --answers 1024` first).
Each is then evaluated (weights rounded to bf16, as the head ships) on the target's greedy answers to the
six held-out sets: Σ min(p, q) of the first draft (α at T = 1) and its agreement with the target's argmax
(α at T = 0). An arm's lead over the control is what its change adds at this budget.
Resumable in parts: the target's features (one teacher-forced pass a shard), the held-out set and each
arm's figures are kept in the work root (work-root/layers.json).

Its answer is written in docs/LOG.md, "2026-12-03 — What limits the feature head: more of the target's
layers, a third decoder layer, or greedy answers (negative)".
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from tqdm import tqdm  # noqa: E402

from specdec.config import HeadTrainingConfig  # noqa: E402
from specdec.core.feature_head import FeatureHead  # noqa: E402
from specdec.errors import SpecDecError  # noqa: E402
from specdec.models.feature_head_files import HEAD_TOKENS, SHIPPED_HEAD  # noqa: E402
from specdec.models.loading import load_model  # noqa: E402
from specdec.paths import BUNDLED_TARGET, HELD_OUT_PROMPT_SETS  # noqa: E402
from specdec.training.campaign import ANSWERS_PATTERN, campaign_answers_folder, load_answers  # noqa: E402
from specdec.training.features import target_layer_features  # noqa: E402
from specdec.training.train_draft import draw_batch, draw_weights, learning_rate_factor, warmed_up  # noqa: E402
from specdec.training.train_feature_head import (  # noqa: E402
    FeatureExample,
    campaign_feature_examples,
    evaluate_head,
    head_step,
    held_out_eval_sets,
    make_batch,
    saved_head,
)

# arm -> decoder layers added
ARMS = {"last layer": 0, "+ layers": 0, "+ a decoder layer": 1, "greedy answers": 0}


def featured_shard(target, index: int, layers: list[int], work: Path, batch_size: int = 16
                   ) -> list[FeatureExample]:
    """Campaign shard `index` with the target's last hidden state and chosen layers (made once, kept)."""
    path = work / f"features-{'-'.join(map(str, layers))}-{index:04d}.safetensors"
    answers = load_answers(campaign_answers_folder() / ANSWERS_PATTERN.format(index))
    if not path.exists():
        # Batches of like lengths: a right-padded batch costs its longest sequence in every row.
        order = sorted(range(len(answers)), key=lambda i: len(answers[i].token_ids))
        made = {}
        for first in range(0, len(order), batch_size):
            group = order[first : first + batch_size]
            sequences = [answers[i].token_ids for i in group]
            made |= dict(zip(group, target_layer_features(target.model, sequences, layers), strict=True))
        save_file({"final": torch.cat([made[i][0] for i in range(len(answers))]),
                   "layers": torch.cat([made[i][1] for i in range(len(answers))])}, path)
    stored, examples, offset = load_file(path), [], 0
    for answer in answers:
        end = offset + len(answer.token_ids)
        examples.append(FeatureExample(answer.token_ids, stored["final"][offset:end], answer.answer_start,
                                       answer.kind, stored["layers"][offset:end]))
        offset = end
    return examples


def train(head: FeatureHead, examples: list[FeatureExample], embed, output_rows: torch.Tensor, steps: int,
          learning_rate: float, warmup: int, code_share: float) -> list[float]:
    """The shipped recipe's loop (train-head), from a fixed seed: the same batches for every arm."""
    optimizer = torch.optim.AdamW([p for p in head.parameters() if p.requires_grad], lr=learning_rate,
                                  weight_decay=0.0)
    order = torch.Generator().manual_seed(0)
    weights = draw_weights(examples, code_share)
    losses = []
    head.train()
    for step in (bar := tqdm(range(steps), desc="training")):
        batch = make_batch([examples[i] for i in draw_batch(weights, len(examples), 8, order)], embed)
        factor = warmed_up(step, warmup) * learning_rate_factor(step / steps, 0.3)
        losses.append(head_step(head, optimizer, batch, output_rows, learning_rate * factor, unroll=3,
                                feature_weight=0.0, generator=order))
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    return losses


def first_of_each_kind(examples: list[FeatureExample], count: int = 12) -> dict[str, list[FeatureExample]]:
    """The first `count` answers of each kind (in campaign order: the same prompts in either campaign)."""
    kinds: dict[str, list[FeatureExample]] = {}
    for example in examples:
        kinds.setdefault(example.kind, []).append(example)
    return {kind: answers[:count] for kind, answers in kinds.items()}


def evaluated(head: FeatureHead, eval_sets, embed, output_rows) -> dict[str, dict[str, float]]:
    head = head.eval()
    with torch.no_grad():  # as the head ships: bf16 weights
        for parameter in head.parameters():
            parameter.copy_(parameter.to(torch.bfloat16).float())
    return {name: evaluate_head(head, examples, embed, output_rows, unroll=3)
            for name, examples in eval_sets.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=16, help="campaign shards of 64 answers to train on")
    parser.add_argument("--layers", default="3,16", help="the target's decoder layers read besides its last")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--learning-rate", type=float, default=2e-4)
    parser.add_argument("--warmup-steps", type=int, default=100)
    parser.add_argument("--code-share", type=float, default=0.5)
    parser.add_argument("--arms", default=",".join(ARMS), help="which arms to train (comma-separated)")
    parser.add_argument("--features-only", action="store_true", help="make the features, train nothing")
    parser.add_argument("--work-root", type=Path, default=ROOT / ".cache" / "head-layers")
    args = parser.parse_args()
    layers = [int(n) for n in args.layers.split(",")]
    args.work_root.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)

    target = load_model(BUNDLED_TARGET)
    examples = []
    for index in tqdm(range(args.shards), desc="target features (teacher forcing)", unit="shard"):
        examples += featured_shard(target, index, layers, args.work_root)
    greedy_examples = []
    if "greedy answers" in args.arms.split(","):
        try:
            greedy_examples = campaign_feature_examples(greedy=True, answers=64 * args.shards)
        except SpecDecError as error:
            sys.exit(f"error: {error}")
    eval_sets = held_out_eval_sets(target, args.work_root, HeadTrainingConfig().eval_tokens, layers)
    if args.features_only:
        return
    embed = target.model.get_input_embeddings()
    token_ids = json.loads((SHIPPED_HEAD / HEAD_TOKENS).read_text())
    output_rows = target.model.get_output_embeddings().weight.detach()[token_ids].float()

    path = args.work_root / "layers.json"
    settings = {k: str(v) for k, v in vars(args).items() if k != "arms"}
    results = json.loads(path.read_text()) if path.exists() else {}
    if results.get("settings") != settings:  # arms trained with these settings are kept, others not
        results = {"settings": settings}
    results["answers"] = len(examples)
    results["answer_positions"] = sum(len(e.token_ids) - e.answer_start for e in examples)
    shipped = saved_head()
    probe = make_batch(eval_sets["code"][:1], embed)
    results["shipped"] = evaluated(shipped, eval_sets, embed, output_rows)
    if greedy_examples:  # the shipped head on text of its training prompts: sampled, as it trained, or greedy
        results["shipped, training prompts"] = {
            name: evaluated(shipped, first_of_each_kind(answers), embed, output_rows)
            for name, answers in (("sampled", examples), ("greedy", greedy_examples))}
    for arm in args.arms.split(","):
        if arm in results:
            continue
        head = saved_head(layers if arm == "+ layers" else [], ARMS[arm])
        with torch.no_grad():  # every arm starts as the shipped head
            mask = probe.attention_mask
            torch.testing.assert_close(head(probe.embeddings, probe.features, attention_mask=mask,
                                            layer_features=probe.layer_features),
                                       shipped(probe.embeddings, probe.features, attention_mask=mask))
        start = time.perf_counter()
        losses = train(head, greedy_examples if arm == "greedy answers" else examples, embed, output_rows,
                       args.steps, args.learning_rate, args.warmup_steps, args.code_share)
        results[arm] = evaluated(head, eval_sets, embed, output_rows)
        results[arm]["training"] = {"minutes": (time.perf_counter() - start) / 60,
                                    "last_100_loss": sum(losses[-100:]) / len(losses[-100:])}
        path.write_text(json.dumps(results, indent=1))
    path.write_text(json.dumps(results, indent=1))

    print(f"\n{results['answers']} answers ({results['answer_positions']} answer positions), "
          f"{args.steps} steps, extra layers {layers}; first draft Σ min(p, q) / agreement:")
    print("| head | " + " | ".join(HELD_OUT_PROMPT_SETS) + " |")
    for row in ["shipped", *(arm for arm in ARMS if arm in results)]:
        cells = [f"{results[row][k]['sum_min_pq']:.3f} / {results[row][k]['agree_1_in_a_row']:.3f}"
                 for k in HELD_OUT_PROMPT_SETS]
        print(f"| {row} | " + " | ".join(cells) + " |")
    if "shipped, training prompts" in results:
        fit = results["shipped, training prompts"]
        print("\nthe shipped head on the first 12 answers of each kind (its training prompts), agreement:")
        print("| answers | " + " | ".join(fit["sampled"]) + " |")
        for name, scores in fit.items():
            print(f"| {name} | " + " | ".join(f"{scores[k]['agree_1_in_a_row']:.3f}" for k in fit["sampled"])
                  + " |")


if __name__ == "__main__":
    main()
