"""What the draft learns to lower: how far its next-token distribution q is from the target's p.

p is the target's top-k at an answer position, renormalised (the label); q is the draft's softmax over a
candidate set, not all 49k tokens (a sampled softmax: every label token in the batch plus random ones,
~10x cheaper a step on a CPU; evaluation always uses the full softmax, so its figures are honest). The
measures (`DraftTrainingConfig.loss`):

- "kl": the cross-entropy -Σ p log q, forward KL up to p's own entropy (DistillSpec's baseline). It
  punishes q for missing any of p's mass, however small, and so spreads q over p's tail.
- "tvd": the total variation ½ Σ |p - q| = 1 - Σ min(p, q): exactly the chance that speculative sampling
  rejects a draft at T = 1 (DistillSpec found it the objective best aligned with acceptance). Its gradient
  raises q only where q < p, and asks nothing where q already covers p.
- "mix": their mean.
"""

from __future__ import annotations

import torch
from transformers import LlamaForCausalLM

from specdec.training.data import Example, right_padded


def sampled_candidates(top_ids: torch.Tensor, num_rows: int, negatives: int,
                       generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows of an output head a sampled softmax scores: every label in `top_ids` (N, k), plus
    `negatives` random rows -> (candidates, where each label sits among them (N, k))."""
    random_ids = torch.randint(num_rows, (negatives,), generator=generator)
    candidates, position = torch.unique(torch.cat([top_ids.flatten(), random_ids]), return_inverse=True)
    return candidates, position[: top_ids.numel()].view_as(top_ids)


def cross_entropy(target_probs: torch.Tensor, draft_log_probs: torch.Tensor) -> torch.Tensor:
    """-Σ p log q over the labels, averaged over positions. Both (N, k): p and log q at the same tokens."""
    return -(target_probs * draft_log_probs).sum(-1).mean()


def total_variation(target_probs: torch.Tensor, draft_log_probs: torch.Tensor) -> torch.Tensor:
    """1 - Σ min(p, q) over the labels, averaged over positions. p is zero outside its labels, so the sum
    over the labels is the sum over every token: the total variation when p sums to 1."""
    return (1 - torch.minimum(target_probs, draft_log_probs.exp()).sum(-1)).mean()


def distillation_loss(
    draft: LlamaForCausalLM, examples: list[Example], negatives: int = 4096,
    generator: torch.Generator | None = None, argmax_weight: float = 0.0, loss: str = "kl",
) -> torch.Tensor:
    """The draft's distance from the target's renormalised top-k over answer positions (`loss`: kl, tvd
    or mix, above). `argmax_weight` moves that share of each label onto the target's top token (the
    top-k's first)."""
    device = draft.lm_head.weight.device  # examples are stored on the CPU; the step runs on the draft's
    input_ids, mask = right_padded([e.token_ids for e in examples])
    hidden = draft.model(input_ids=input_ids.to(device),
                         attention_mask=mask.to(device)).last_hidden_state  # (B, width, d)
    # The head only runs where there is a label: the positions that predict answer tokens.
    rows = torch.cat([torch.full((len(e.top_ids),), i) for i, e in enumerate(examples)]).to(device)
    cols = torch.cat([torch.arange(len(e.top_ids)) + e.answer_start - 1 for e in examples]).to(device)
    top_ids = torch.cat([e.top_ids for e in examples])  # (N, k)
    top_probs = torch.cat([e.top_probs.float() for e in examples]).to(device)
    top_probs = top_probs / top_probs.sum(-1, keepdim=True) * (1 - argmax_weight)
    top_probs[:, 0] += argmax_weight
    head = draft.lm_head.weight  # (vocab, d)
    candidates, label_columns = sampled_candidates(top_ids, head.shape[0], negatives, generator)
    candidates, label_columns = candidates.to(device), label_columns.to(device)
    log_q = torch.log_softmax((hidden[rows, cols] @ head[candidates].T).float(), dim=-1)  # (N, C)
    log_q = log_q.gather(1, label_columns)  # (N, k): q at the label tokens
    if loss == "kl":
        return cross_entropy(top_probs, log_q)
    if loss == "tvd":
        return total_variation(top_probs, log_q)
    if loss == "mix":
        return (cross_entropy(top_probs, log_q) + total_variation(top_probs, log_q)) / 2
    raise ValueError(f"unknown loss {loss!r}")
