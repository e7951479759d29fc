"""A feature head's speed machinery: its one-position step by hand (specdec/kernels/decoder_step.py)
predicts what its forward predicts, and a loaded head keeps int8 weights only where they draft faster
(models.feature_head_files, timed as specdec/kernels/choice.py times a draft)."""

import pytest
import torch
from round_laws import PROMPT, emitted
from tiny_models import tiny_model
from transformers import DynamicCache

from specdec.config import SamplingConfig, Settings
from specdec.core.cached_model import CachedModel
from specdec.core.drafters import FeatureDrafter
from specdec.core.feature_head import FeatureHead
from specdec.core.rounds import speculative_rounds, target_only_steps
from specdec.kernels import decoder_step as step_module
from specdec.kernels.decoder_step import head_step_by_hand
from specdec.kernels.matmul import INT8, Int8Linear, int8_available, layout_of, set_layout
from specdec.models import feature_head_files as head_module
from specdec.models.feature_head_files import load_head, save_head
from specdec.models.loading import LoadedModel
from specdec.training.train_feature_head import build_head


def stepping_head(tiny_target, vocab, fuse: str) -> FeatureHead:
    """A 2-layer head that reads its feature: fc over [embedding ; feature], or (started from a draft)
    embedding + fc(normalised feature)."""
    torch.manual_seed(0)
    draft_layers = tiny_model(vocab, seed=3).state_dict() if fuse == "adds" else None
    head = build_head(tiny_target, layers=2, draft_layers=draft_layers)
    with torch.no_grad():
        head.fc.weight.normal_(std=0.1)
    return head.eval()


def step_by_hand_and_by_forward(head, steps=4):
    """Both ways after the same 6-position context -> [(by hand, by forward)] per step, and both caches."""
    hidden, generator = head.config.hidden_size, torch.Generator().manual_seed(1)
    context = torch.randn(1, 6, hidden, generator=generator)
    by_hand, library = DynamicCache(config=head.config), DynamicCache(config=head.config)
    pairs, step = [], head_step_by_hand(head)
    with torch.inference_mode():
        head(context, context, by_hand)
        head(context, context, library)
        for _ in range(steps):
            embedding, feature = torch.randn(2, 1, hidden, generator=generator)
            stepped = step(by_hand, head.fuse(embedding, feature)[None])
            pairs.append((stepped, head(embedding[None], feature[None], library)[0]))
    return pairs, by_hand, library


@pytest.mark.parametrize(("fuse", "weights"), [("concatenates", "fp32"), ("adds", "fp32"), ("adds", "int8")])
def test_a_heads_step_by_hand_predicts_what_its_forward_predicts(tiny_target, vocab, fuse, weights):
    """A head's step by hand (its decoder's layers, kernels.decoder_step.head_step_by_hand) gives forward's
    predicted feature for one position, and leaves the same keys and values in the cache."""
    head = stepping_head(tiny_target, vocab, fuse)
    if weights == "int8":
        if not int8_available():
            pytest.skip("this torch has no int8 weight product")
        set_layout(head, INT8)
    pairs, by_hand, library = step_by_hand_and_by_forward(head)
    for stepped, forward in pairs:
        torch.testing.assert_close(stepped, forward)
    for layer_by_hand, layer_library in zip(by_hand.layers, library.layers, strict=True):
        torch.testing.assert_close(layer_by_hand.keys, layer_library.keys)
        torch.testing.assert_close(layer_by_hand.values, layer_library.values)


def test_a_head_step_that_left_out_the_context_would_be_caught(tiny_target, vocab, monkeypatch):
    """Negative control: the comparison above fails for a step that does not read the cached positions."""
    head = stepping_head(tiny_target, vocab, "adds")
    real_step = step_module.embedded_step

    def step_without_context(decoder, cache, hidden):
        return real_step(decoder, DynamicCache(config=head.config), hidden)

    monkeypatch.setattr(step_module, "embedded_step", step_without_context)
    pairs, _, _ = step_by_hand_and_by_forward(head, steps=1)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(*pairs[0])


@pytest.mark.parametrize("int8_faster", [True, False])
def test_a_loaded_head_keeps_int8_weights_only_where_they_draft_faster(tiny_target, vocab, tmp_path,
                                                                      monkeypatch, int8_faster,
                                                                      nothing_timed):
    if not int8_available():
        pytest.skip("this torch has no int8 weight product")
    save_head(stepping_head(tiny_target, vocab, "adds"), tmp_path, list(range(0, vocab, 2)), {"tiny": True})
    timed = []

    def fake_seconds(head, *_):
        timed.append(layout_of(head) == INT8)
        return 1.0 if timed[-1] == int8_faster else 2.0

    monkeypatch.setattr(head_module, "_drafting_step_seconds", fake_seconds)
    monkeypatch.delenv("SPECDEC_DTYPE", raising=False)
    loaded = load_head(str(tmp_path), LoadedModel("tiny", tiny_target, None))
    assert (layout_of(loaded.head) == INT8) == int8_faster
    assert timed == [False, True] * 9  # in turns
    assert ("int8 weights" in loaded.describe()) == int8_faster
    # Its drafts score the reduced head in the head's layout, and greedy output stays the target's.
    greedy = SamplingConfig(temperature=0)
    plain = [s.token for s in target_only_steps(CachedModel(tiny_target, vocab), PROMPT, greedy,
                                                torch.Generator(), 30)]
    target = CachedModel(tiny_target, vocab, keep_features=True)
    drafter = FeatureDrafter(loaded.head, target, loaded.reduced, step=head_step_by_hand(loaded.head))
    traces = list(speculative_rounds(target, drafter, PROMPT, Settings(4, greedy, 30, adaptive=False),
                                     torch.Generator()))
    assert emitted(traces) == plain
    assert (type(loaded.reduced.layer) is Int8Linear) == int8_faster
    # SPECDEC_DTYPE keeps a head off int8, as it keeps a draft.
    monkeypatch.setenv("SPECDEC_DTYPE", "float32")
    assert layout_of(load_head(str(tmp_path), LoadedModel("tiny", tiny_target, None)).head) != INT8
