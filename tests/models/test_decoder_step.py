"""A draft's one-token step by hand (specdec/kernels/decoder_step.py) computes what the library's forward
computes, and a draft's CachedModel given that step gives the logits the library's forward gives."""

import pytest
import torch
from tiny_models import tiny_model
from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel

from specdec.core.cached_model import CachedModel
from specdec.core.early_exit import shallow_layers
from specdec.kernels import decoder_step as step_module
from specdec.kernels.decoder_step import decoder_step, draft_step_by_hand, shallow_step, steps_by_hand
from specdec.kernels.matmul import INT8, set_layout

PROMPT = [5, 17, 42, 9, 120, 33, 7]
FED = [61, 2, 250, 14, 14, 99]


def hidden_by_library(model, cache, token_id):
    with torch.inference_mode():
        return model.get_decoder()(input_ids=torch.tensor([[token_id]]), cache=cache,
                                   use_cache=True).last_hidden_state[0]


def prefilled(model) -> DynamicCache:
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(input_ids=torch.tensor([PROMPT]), cache=cache, use_cache=True)
    return cache


def llama3_scaled(model):
    """The same weights with Llama 3's rotary scaling (its cos and sin carry an attention scale)."""
    model.config.rope_parameters = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 8}
    scaled = type(model)(model.config).eval()
    scaled.load_state_dict(model.state_dict())
    return scaled


@pytest.mark.parametrize("variant", ["plain", "int8 weights", "llama3 rope"])
def test_a_step_by_hand_gives_the_librarys_hidden_states_and_cache(variant):
    model = tiny_model(300, seed=1, layers=3)
    if variant == "int8 weights":
        set_layout(model, INT8)
    if variant == "llama3 rope":
        model = llama3_scaled(model)
    by_hand, library = prefilled(model), prefilled(model)
    for token_id in FED:
        torch.testing.assert_close(decoder_step(model, by_hand, token_id),
                                   hidden_by_library(model, library, token_id))
    for layer_by_hand, layer_library in zip(by_hand.layers, library.layers, strict=True):
        torch.testing.assert_close(layer_by_hand.keys, layer_library.keys)
        torch.testing.assert_close(layer_by_hand.values, layer_library.values)


@pytest.mark.parametrize("layers", [1, 2])
def test_an_early_exits_step_by_hand_gives_the_librarys_shallow_state(layers):
    """shallow_step (an early exit's drafting step through the target's first layers) against the
    library's layer calls (core.early_exit.shallow_layers): the same state and the same entries in the
    shared layers of the cache, the deeper layer untouched."""
    model = tiny_model(300, seed=1, layers=3)
    decoder = model.get_decoder()
    by_hand, library = prefilled(model), prefilled(model)
    for token_id in FED:
        torch.testing.assert_close(shallow_step(decoder, decoder.layers[:layers], by_hand, token_id),
                                   shallow_layers(decoder, library, token_id, layers))
    for index, (layer_by_hand, layer_library) in enumerate(zip(by_hand.layers, library.layers, strict=True)):
        torch.testing.assert_close(layer_by_hand.keys, layer_library.keys)
        assert layer_by_hand.get_seq_length() == len(PROMPT) + (len(FED) if index < layers else 0)


def test_a_step_without_positions_would_be_caught(monkeypatch):
    """Negative control: the comparison above fails for a step that leaves out the rotary positions."""
    model = tiny_model(300, seed=1, layers=3)
    monkeypatch.setattr(step_module, "apply_rotary_pos_emb", lambda query, key, cos, sin: (query, key))
    by_hand, library = prefilled(model), prefilled(model)
    with pytest.raises(AssertionError):
        for token_id in FED:
            torch.testing.assert_close(decoder_step(model, by_hand, token_id),
                                       hidden_by_library(model, library, token_id))


def test_a_drafts_cache_steps_by_hand_and_rolls_back_like_the_librarys():
    model = tiny_model(300, seed=1)
    draft = CachedModel(model, 300, step=draft_step_by_hand(model))
    target_like = CachedModel(model, 300)
    assert draft.step is not None and target_like.step is None
    for cached in (draft, target_like):
        cached.extend(PROMPT)
    for token_id in FED:
        torch.testing.assert_close(draft.extend([token_id]), target_like.extend([token_id]))
    for cached in (draft, target_like):
        cached.rollback(len(PROMPT) + 2)  # as after a round whose later drafts were rejected
    torch.testing.assert_close(draft.extend([3]), target_like.extend([3]))
    torch.testing.assert_close(draft.extend([8, 11]), target_like.extend([8, 11]))  # a catch-up pass
    assert draft.cache_length == target_like.cache_length == len(PROMPT) + 5


def test_other_architectures_keep_the_librarys_forward():
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=300, n_embd=32, n_layer=1, n_head=2)).eval()
    assert not steps_by_hand(gpt2)
    assert draft_step_by_hand(gpt2) is None


def test_the_environment_can_send_drafts_through_the_librarys_forward(monkeypatch):
    monkeypatch.setenv("SPECDEC_DRAFT_STEP", "library")
    assert draft_step_by_hand(tiny_model(300, seed=1)) is None
