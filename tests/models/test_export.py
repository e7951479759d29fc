"""The exported draft outside specdec: plain transformers loads and drafts with it, the GGUF reads back."""

import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from specdec.cli.main import main
from specdec.models.export import GGUF_NAME
from specdec.models.loading import HEAD_TOKENS_FILE, bundled_target_folder
from specdec.paths import HELD_OUT_PROMPT_SETS

pytestmark = pytest.mark.slow  # assembles and exports the bundled draft, runs the bundled target

STANDARD_FILES = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                  "tokenizer_config.json", "chat_template.jinja", "README.md", GGUF_NAME}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "draft"
    assert main(["export-draft", str(out), "--gguf"]) == 0
    return out


def test_export_is_a_plain_transformers_folder_with_a_full_head(exported):
    assert {p.name for p in exported.iterdir()} == STANDARD_FILES
    assert not (exported / HEAD_TOKENS_FILE).exists()  # no reduced head: an engine would not read it
    config = json.loads((exported / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["tie_word_embeddings"]
    draft = AutoModelForCausalLM.from_pretrained(exported)
    assert draft.get_output_embeddings().weight.shape[0] == config["vocab_size"] == 49152


def test_export_refuses_a_folder_that_is_not_empty(exported, capsys):
    assert main(["export-draft", str(exported)]) == 2
    assert "not empty" in capsys.readouterr().err


def test_gguf_reads_back_with_the_same_tensors_exactly(exported):
    from_gguf = AutoModelForCausalLM.from_pretrained(exported, gguf_file=GGUF_NAME, dtype=torch.float32)
    assert from_gguf.config.num_hidden_layers == 2
    saved = load_file(exported / "model.safetensors")
    read = from_gguf.state_dict()
    assert saved.keys() <= read.keys()
    for name, tensor in saved.items():
        assert torch.equal(read[name], tensor), name
    tokenizer = AutoTokenizer.from_pretrained(exported, gguf_file=GGUF_NAME)
    assert tokenizer.get_vocab() == AutoTokenizer.from_pretrained(exported).get_vocab()


def test_transformers_assisted_greedy_equals_the_targets_own_greedy_output(exported):
    """docs/howto/export.md's snippet, on held-out prompts: the exported draft changes speed, never the
    text."""
    folder = bundled_target_folder()
    target = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    draft = AutoModelForCausalLM.from_pretrained(exported, dtype=torch.float32)
    prompts = [json.loads(HELD_OUT_PROMPT_SETS[name].read_text())["prompts"][0] for name in ("code", "prose")]
    for prompt in prompts:
        ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                            return_tensors="pt", return_dict=True)["input_ids"]
        options = {"max_new_tokens": 40, "do_sample": False, "pad_token_id": tokenizer.eos_token_id}
        plain = target.generate(ids, **options)
        assisted = target.generate(ids, assistant_model=draft, **options)
        assert torch.equal(assisted, plain), prompt
