"""The target's features read whole (teacher forcing): its last hidden state at every position of
given sequences, and with it, for a head that reads them, its earlier layers' outputs.

Below the campaign (which fills in the features of shards written on another machine) and the
head's training (which learns from them), so that neither imports the other for them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import LlamaForCausalLM

from specdec.training.data import right_padded


def _read_whole(target: LlamaForCausalLM, sequences: list[torch.Tensor], bf16: bool,
                hidden_states: bool = False):
    """The target's decoder over the sequences in one right-padded batch (teacher forcing)."""
    input_ids, mask = right_padded(sequences)
    with torch.autocast(target.device.type, torch.bfloat16, enabled=bf16):
        return target.get_decoder()(input_ids=input_ids.to(target.device),
                                    attention_mask=mask.to(target.device), output_hidden_states=hidden_states)


@torch.inference_mode()
def target_features(target: LlamaForCausalLM, sequences: list[torch.Tensor], bf16: bool = False
                    ) -> list[torch.Tensor]:
    """The target's last hidden state (after its final norm: what its output head reads) at every
    position of each sequence, in one right-padded batch. `bf16`: computed under bf16 autocast, about
    twice as fast on a CPU with bf16 math; the features differ from fp32 by far less than the head's
    own error."""
    hidden = _read_whole(target, sequences, bf16).last_hidden_state
    return [hidden[row, : len(s)].to(torch.bfloat16).cpu() for row, s in enumerate(sequences)]


@torch.inference_mode()
def target_layer_features(target: LlamaForCausalLM, sequences: list[torch.Tensor], layers: Sequence[int],
                          bf16: bool = False) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """As target_features, and beside each sequence's features the target's hidden states after each of
    its decoder `layers` (counted from 1), side by side: (length, len(layers) * hidden), bf16."""
    output = _read_whole(target, sequences, bf16, hidden_states=True)
    # hidden_states[0] is the embeddings, hidden_states[n] the output of layer n.
    chosen = torch.cat([output.hidden_states[n] for n in layers], dim=-1)
    return [(output.last_hidden_state[row, : len(s)].to(torch.bfloat16).cpu(),
             chosen[row, : len(s)].to(torch.bfloat16).cpu()) for row, s in enumerate(sequences)]
