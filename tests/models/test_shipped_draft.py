"""The draft trained by `python -m specdec train-draft` and shipped in assets/draft/."""

import pytest
import torch

from specdec.config import SamplingConfig, Settings
from specdec.core.cached_model import CachedModel
from specdec.models.loading import SHIPPED_DRAFT
from specdec.models.pair import LOOKUP_FIRST, default_drafter
from specdec.paths import BUNDLED_DRAFT

pytestmark = pytest.mark.slow  # loads the bundled models

CODE_PROMPT = "Write a Python function that returns the last n lines of a text file."  # not trained on
AGREEMENT_FLOOR = 0.3  # chance is about 1 in 8192 (the reduced head); measured: 0.60


def test_shipped_draft_is_the_default_and_shares_the_tokenizer(bundled_pair):
    assert (SHIPPED_DRAFT / "draft-layers.safetensors").stat().st_size < 25e6
    assert default_drafter(bundled_pair.target.name) == LOOKUP_FIRST + BUNDLED_DRAFT
    assert bundled_pair.draft.name == BUNDLED_DRAFT  # ModelPair.load checked the vocabularies
    assert bundled_pair.lookup_first and bundled_pair.drafter_name == LOOKUP_FIRST + BUNDLED_DRAFT
    assert bundled_pair.draft.tokenizer.get_vocab() == bundled_pair.target.tokenizer.get_vocab()
    assert bundled_pair.draft.num_parameters < bundled_pair.target.num_parameters / 3


def test_greedy_agreement_on_a_code_prompt_is_far_above_chance(bundled_pair):
    from specdec.models.runs import generate
    from specdec.training.data import training_prompts

    assert CODE_PROMPT not in training_prompts()

    ids = bundled_pair.encode_prompt(CODE_PROMPT, chat=True, max_new_tokens=48)
    greedy = Settings(sampling=SamplingConfig(temperature=0), max_new_tokens=48)
    answer = generate(bundled_pair, ids, greedy, speculative=False).token_ids
    # Teacher-forced: at each answer position, does the draft's argmax equal the target's next token?
    drafter = bundled_pair.new_drafter()
    logits = drafter.cached.extend(ids + answer[:-1])[len(ids) - 1 :]
    agreement = (logits.argmax(-1) == torch.tensor(answer)).float().mean().item()
    assert agreement > AGREEMENT_FLOOR, agreement


def test_reduced_head_is_in_use(bundled_pair):
    drafter = bundled_pair.new_drafter()
    assert isinstance(drafter.cached, CachedModel) and drafter.cached.head is not None
    assert len(drafter.cached.head.token_ids) == 8192


def test_a_trained_drafts_output_folder_loads_as_a_draft(bundled_pair, tmp_path):
    """train-draft writes layers, not a model: --draft-model takes that folder (to race it before it is
    shipped), assembled with the target's embeddings as the shipped draft is."""
    import shutil

    from safetensors.torch import load_file

    from specdec.models.loading import bundled_draft_folder, resolve_model_path

    trained = tmp_path / "draft"
    shutil.copytree(SHIPPED_DRAFT, trained, ignore=shutil.ignore_patterns("*.md", "*-steps.json"))
    assembled = resolve_model_path(str(trained))
    assert assembled != str(trained) and "trained-draft-" in assembled
    ours = load_file(f"{assembled}/model.safetensors")
    shipped = load_file(bundled_draft_folder() / "model.safetensors")
    assert ours.keys() == shipped.keys() and all(torch.equal(ours[k], shipped[k]) for k in ours)
    # Negative control: a complete model folder, or any other path, is passed on as it is.
    assert resolve_model_path(str(bundled_draft_folder())) == str(bundled_draft_folder())
    assert resolve_model_path(str(tmp_path)) == str(tmp_path)
    shutil.rmtree(assembled)  # a copy of the shipped draft: not worth its 140 MB in the cache
