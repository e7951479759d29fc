"""The CUDA path on a real GPU (skipped elsewhere; `scripts/gpu_check.py` runs them with `-m cuda`)."""

import pytest
import torch

from specdec.config import SamplingConfig, Settings
from specdec.models.pair import ModelPair
from specdec.models.runs import generate

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

GREEDY = Settings(gamma=4, max_new_tokens=24, sampling=SamplingConfig(temperature=0.0))


def test_the_pair_loads_on_the_gpu_with_an_fp32_target(tiny_pair_dirs, monkeypatch):
    monkeypatch.delenv("SPECDEC_DTYPE", raising=False)
    pair = ModelPair.load(tiny_pair_dirs["target"], tiny_pair_dirs["draft"])
    assert pair.target.device.type == "cuda" and pair.draft.device.type == "cuda"
    assert pair.target.precision == "float32"  # greedy equality rests on it
    assert pair.draft.precision == ("bfloat16" if torch.cuda.is_bf16_supported() else "float32")


def test_greedy_speculative_equals_plain_greedy_on_the_gpu(tiny_pair_dirs):
    pair = ModelPair.load(tiny_pair_dirs["target"], tiny_pair_dirs["draft"])
    ids = pair.encode_prompt("def add(a, b):", chat=False, max_new_tokens=GREEDY.max_new_tokens)
    speculative = generate(pair, ids, GREEDY, speculative=True).token_ids
    assert speculative == generate(pair, ids, GREEDY, speculative=False).token_ids


def test_a_training_step_runs_where_the_target_is(tiny_pair_dirs):
    from specdec.models.loading import load_model
    from specdec.training.data import label_answers
    from specdec.training.train_draft import build_draft, distillation_loss

    target = load_model(tiny_pair_dirs["target"])
    examples = label_answers(target, ["Say hi"], ["hi there"], max_tokens=8, top_k=4)
    assert examples[0].top_ids.device.type == "cpu"  # labels are stored on the CPU
    draft = build_draft(target.model, layers=1)
    assert draft.lm_head.weight.device.type == "cuda"
    loss = distillation_loss(draft, examples, negatives=8)
    loss.backward()
    assert torch.isfinite(loss) and loss.device.type == "cuda"
