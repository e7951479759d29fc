"""A feature head (EAGLE, Li et al. 2024): drafting from the target's own last hidden state.

A standalone draft must guess the next token from the text alone. The target has already read that
text: its last hidden state at the previous position (its "feature", the vector its output head
turns into p) holds what its 30 layers worked out, and a head can start from there. The head is a
decoder layer or two over [embedding of the token just chosen ; the target's feature before it]; it
predicts the target's next feature, and the target's own output head turns that into q. To draft a
second token it feeds its predicted feature forward in place of the target's. (The bundled head's two
layers started as the trained draft model's, which read the embedding alone: they read the embedding
plus a projection of the feature, and training taught them to use the feature too.)

    position i reads   (embedding of x_{i+1}, feature f_i)   and predicts f_{i+1}, so q for x_{i+2}

The target's features come free with every verification pass (CachedModel keeps them), so the head
reads the target's own features for every verified position and its predictions only for the drafts.
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from transformers import LlamaConfig, LlamaModel
from transformers.models.llama.modeling_llama import LlamaRMSNorm


def head_config(target_config: LlamaConfig, layers: int = 1) -> LlamaConfig:
    """The target's layer shape, `layers` deep; no vocabulary of its own (it reads embeddings)."""
    config = copy.deepcopy(target_config)
    config.num_hidden_layers = layers
    config.vocab_size = 1  # the decoder's token table is never used: the head feeds inputs_embeds
    config.pad_token_id = config.bos_token_id = config.eos_token_id = None  # no vocabulary: no special ids
    config.tie_word_embeddings = False
    config.architectures = ["FeatureHead"]  # specdec.core.feature_head, not a causal LM
    return config


class FeatureHead(nn.Module):
    """fc([embedding ; feature]) -> decoder layer(s) and final norm -> the predicted next feature.

    Or, with `config.fuse_by_adding`, embedding + fc(feature): for layers that start out as a trained
    draft's, which read the embedding as it is, the same start with half fc's weights (the bundled
    head's file then stays under 15 MB).
    """

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.config = config
        hidden = config.hidden_size
        self.adds = getattr(config, "fuse_by_adding", False)
        self.fc = nn.Linear(hidden if self.adds else 2 * hidden, hidden)
        self.decoder = LlamaModel(config)
        # Optional: the feature normalised before fusing (as EAGLE-3 normalises the states it reads), for
        # layers that start out reading token embeddings, some 15 times smaller than the target's features.
        self.feature_norm = LlamaRMSNorm(hidden, config.rms_norm_eps) if getattr(
            config, "feature_norm", False) else None
        # Optional (EAGLE-3 reads low, middle and high layers): the target's hidden states after the
        # decoder layers in `config.feature_layers`, each normalised, projected and added to the input
        # where the target has read the position. Drafted positions have none: zeros there add nothing.
        feature_layers = getattr(config, "feature_layers", None) or []
        self.layer_norm = self.layer_fc = None
        if feature_layers:
            self.layer_norm = LlamaRMSNorm(hidden, config.rms_norm_eps)
            self.layer_fc = nn.Linear(len(feature_layers) * hidden, hidden, bias=False)

    def forward(
        self,
        token_embeddings: torch.Tensor,  # (batch, positions, hidden): embeddings of x_{i+1}
        features: torch.Tensor,  # (batch, positions, hidden): f_i, the target's or the head's own
        cache=None,
        attention_mask: torch.Tensor | None = None,
        layer_features: torch.Tensor | None = None,  # (batch, positions, layers * hidden), or zeros
    ) -> torch.Tensor:
        """Predicted features (batch, positions, hidden), in the space of the target's last hidden state."""
        fused = self.fuse(token_embeddings, features)
        if self.layer_fc is not None and layer_features is not None:
            per_layer = layer_features.unflatten(-1, (-1, self.config.hidden_size))
            fused = fused + self.layer_fc(self.layer_norm(per_layer).flatten(-2))
        output = self.decoder(inputs_embeds=fused, attention_mask=attention_mask, cache=cache,
                              use_cache=cache is not None)
        return output.last_hidden_state

    @property
    def dtype(self) -> torch.dtype:
        return self.fc.weight.dtype

    def fuse(self, token_embeddings: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """The decoder's input from the embeddings and the features (..., hidden) each."""
        if self.feature_norm is not None:
            features = self.feature_norm(features)
        if self.adds:
            return token_embeddings + self.fc(features)
        return self.fc(torch.cat([token_embeddings, features], dim=-1))
