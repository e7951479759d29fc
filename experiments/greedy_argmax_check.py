"""How often the fp32 target's argmax differs from a greedy campaign answer's next token.

    .venv/bin/python experiments/greedy_argmax_check.py SHARD [SHARD ...]

The greedy campaign writes in bf16 where the CPU has bf16 math (`campaign`), while `bench` and the app
run the target in fp32: where two tokens nearly tie, the two can pick differently, and the head then
learns a token the fp32 target would not have written. For each shard given, this reads every answer
whole through the fp32 target (teacher-forced, one answer at a time: no padding) and counts the answer
positions whose stored next token is not the fp32 argmax, and the answers with any such position. A
shard written in fp32 is the control: its count should be near zero (a batched pass and a single one
can still round apart). Prints, per shard, the dtype it was written in (its metadata) and the counts.

Its answer is written in assets/campaign-greedy/README.md (the greedy campaign's card: shards 118–171,
measured 2026-12-05).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from safetensors import safe_open

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdec.models.loading import load_model  # noqa: E402
from specdec.paths import BUNDLED_TARGET  # noqa: E402
from specdec.training.campaign import ANSWERS_PATTERN, campaign_answers_folder, load_answers  # noqa: E402


@torch.inference_mode()
def main() -> None:
    if not sys.argv[1:] or not all(arg.isdigit() for arg in sys.argv[1:]):
        sys.exit(__doc__)  # shard numbers only, e.g. 200 60
    shards = [int(arg) for arg in sys.argv[1:]]
    target = load_model(BUNDLED_TARGET)  # fp32 on a CPU, as bench and the app load it
    print(f"target: {target.model.dtype}")
    for shard in shards:
        path = campaign_answers_folder(greedy=True) / ANSWERS_PATTERN.format(shard)
        with safe_open(path, "pt") as stored:
            written_in = stored.metadata().get("dtype", "not recorded")
        differing = positions = answers_differing = 0
        answers = load_answers(path)
        for answer in answers:
            ids = answer.token_ids
            logits = target.model(ids[None]).logits[0]
            # the prediction at position i is for token i + 1: over the answer's tokens only
            predicted = logits[answer.answer_start - 1 : len(ids) - 1].argmax(-1)
            misses = int((predicted != ids[answer.answer_start :]).sum())
            differing += misses
            positions += len(ids) - answer.answer_start
            answers_differing += misses > 0
        print(f"shard {shard} (written in {written_in}): {differing} of {positions} positions "
              f"({differing / positions:.2%}) not the fp32 argmax; {answers_differing} of {len(answers)} "
              "answers with any")


if __name__ == "__main__":
    main()
