import os

# The tests run small models on 1 to a few tokens at a time: one thread is faster than two on a
# shared 2-core machine (less contention), and it must be set before torch is imported.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Draft lengths must not depend on how fast this machine ran a pass at load: every pass priced as one
# token's (the pricing itself is tested with given costs, and the timing in test_kernel_choice).
os.environ.setdefault("SPECDEC_PASS_COSTS", "1")

import pytest

# tiny_models (torch and transformers, seconds to import) is imported by the fixtures that use it, not
# here: the quick loop's controlling process loads this file too, before its workers start.


@pytest.fixture
def nothing_timed(monkeypatch, tmp_path):
    """Nothing timed yet in this process and nothing kept on disk (kernels.kept_timings): a test that
    fakes the timing sees it run, and its fakes are kept in its own folder, not beside real figures."""
    from specdec.kernels import choice

    monkeypatch.setattr(choice, "_CHOSEN", {})
    monkeypatch.setenv("SPECDEC_TIMINGS", str(tmp_path / "machine-timings"))


@pytest.fixture(scope="session")
def tokenizer():
    from tiny_models import tiny_tokenizer

    return tiny_tokenizer()


@pytest.fixture(scope="session")
def tiny_target(tokenizer):
    from tiny_models import tiny_model

    return tiny_model(len(tokenizer), seed=0)


@pytest.fixture(scope="session")
def tiny_pair_dirs(tmp_path_factory):
    """A tiny target, draft and feature head on disk (same tokenizer), plus a draft with another
    tokenizer."""
    from tiny_models import save_tiny_head, save_tiny_model, tiny_model

    root = tmp_path_factory.mktemp("tiny-models")
    target = save_tiny_model(root / "target", 300, seed=0)
    return {
        "target": str(target),
        "head": str(save_tiny_head(root / "head", tiny_model(300, seed=0))),
        "draft": str(save_tiny_model(root / "draft", 300, seed=1)),
        # Padded wider than the vocabulary, as real families do: must still pair with the target.
        "padded_draft": str(save_tiny_model(root / "padded", 320, seed=2)),
        "other_tokenizer": str(save_tiny_model(root / "other", 300, seed=3, tokenizer_vocab=280)),
    }


TINY_PROMPT = "def add(a, b):\n    return a + b\n"


@pytest.fixture(scope="module")
def pair(tiny_pair_dirs):
    """The tiny target with its tiny draft (a module's own `pair` fixture, where it has one, wins)."""
    from specdec.models.pair import ModelPair

    return ModelPair.load(tiny_pair_dirs["target"], tiny_pair_dirs["draft"])


@pytest.fixture(scope="module")
def prompt_ids(pair):
    return pair.encode_prompt(TINY_PROMPT, False, 16)


@pytest.fixture(scope="module")
def close_pair(tmp_path_factory):
    """The tiny target and a draft that is its noisy copy (it agrees often, not always)."""
    from tiny_models import perturbed_copy, tiny_model, tiny_tokenizer

    from specdec.models.pair import ModelPair

    root = tmp_path_factory.mktemp("close-pair")
    tokenizer = tiny_tokenizer()
    target = tiny_model(len(tokenizer), seed=0)
    for name, model in (("target", target), ("draft", perturbed_copy(target, 0.3, seed=5))):
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    return ModelPair.load(str(root / "target"), str(root / "draft"))


@pytest.fixture(scope="session")
def vocab(tokenizer):
    return len(tokenizer)


@pytest.fixture(scope="session")
def sharp_target(vocab):
    """A tiny target whose choices depend on its context (sharp attention)."""
    from tiny_models import sharp_tiny_model

    return sharp_tiny_model(vocab, seed=0)


@pytest.fixture(scope="session")
def unsure_draft(sharp_target):
    """A draft far enough from the target that its first choice is often wrong and its second sometimes
    right: rejections, and siblings made and kept."""
    from tiny_models import perturbed_copy

    return perturbed_copy(sharp_target, scale=1.0, seed=11)


@pytest.fixture(scope="session")
def bundled_pair():
    from specdec.models.pair import ModelPair

    return ModelPair.load()


@pytest.fixture(autouse=True)
def any_model_allowed(monkeypatch):
    """The tests load tiny models from temporary folders: allow any model, except where a test of the
    allow-list itself sets SPECDEC_ALLOWED_MODELS."""
    monkeypatch.setenv("SPECDEC_ALLOWED_MODELS", "*")
