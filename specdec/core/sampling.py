"""The sampling warp: one function that turns logits into the distribution we sample from.

The same warp is applied to the draft's and the target's logits. That matters: the guarantee
"speculative output ~ target output" holds for the *warped* target distribution, so the draft must
be judged against exactly the distribution plain decoding would sample from.
"""

from __future__ import annotations

import torch
from transformers import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from specdec.config import SamplingConfig


def _warpers(config: SamplingConfig) -> LogitsProcessorList:
    warpers = LogitsProcessorList()
    if not config.greedy and config.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(config.temperature))
    if config.top_k > 0:
        warpers.append(TopKLogitsWarper(config.top_k))
    if config.top_p < 1.0:
        warpers.append(TopPLogitsWarper(config.top_p))
    return warpers


def warp_probs(logits: torch.Tensor, config: SamplingConfig) -> torch.Tensor:
    """Logits (positions, vocab) -> probabilities (positions, vocab), warped by `config`, in float32.

    In greedy mode the probabilities are the plain softmax (top-k/top-p still apply): they are what a
    teacher shows next to the argmax, while the greedy rule itself only looks at the argmax.
    """
    scores = logits.float()
    # The transformers warpers read only `scores`; input_ids is part of their interface, not used here.
    unused_input_ids = torch.empty((scores.shape[0], 0), dtype=torch.long, device=scores.device)
    scores = _warpers(config)(unused_input_ids, scores)
    return torch.softmax(scores, dim=-1)


def sample(probs: torch.Tensor, config: SamplingConfig, generator: torch.Generator) -> torch.Tensor:
    """One token per row of `probs` (positions, vocab) -> (positions,): argmax when greedy.

    The argmax is taken where `probs` are (a GPU's, if the model is on one). A draw uses the run's
    generator, which lives on the CPU so that a seed replays identically on any device: the rows come
    to the host for it.
    """
    if config.greedy:
        return probs.argmax(dim=-1)
    return torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(-1)
