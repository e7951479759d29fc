"""A model name is checked before anything loads (specdec/model_names.py): a mistyped name gets its one
line at once, from the CLI without importing torch."""

import subprocess
import sys
from pathlib import Path

import pytest

from specdec import model_names
from specdec.errors import SpecDecError
from specdec.paths import BUNDLED_DRAFT, BUNDLED_HEAD, BUNDLED_TARGET

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No hub, and an empty local Hugging Face cache."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(model_names, "hub_reachable", lambda: False)
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


@pytest.mark.parametrize(("name", "role", "message"), [
    ("bundled:nope", "target", "no such bundled model"),
    (BUNDLED_HEAD, "target", "no such bundled model"),  # a head drafts; it is no target
    ("/no/such/folder", "target", "no such folder"),
    ("./models/missing", "draft model", "no such folder"),
    ("has spaces in it", "draft model", "not a bundled name, a folder here or a Hugging Face id"),
    ("HuggingFaceTB/SmolLM2-360M", "target", "not in the local Hugging Face cache"),
])
def test_a_name_that_cannot_load_is_refused_with_one_line(offline, name, role, message):
    with pytest.raises(SpecDecError, match=message) as caught:
        model_names.check_model_name(name, role)
    assert f"could not load model '{name}' (the {role})" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_names_that_can_load_pass(offline, tmp_path):
    for name in (BUNDLED_TARGET, BUNDLED_DRAFT):
        model_names.check_model_name(name, "target" if name == BUNDLED_TARGET else "draft model")
    model_names.check_drafter_name("ngram")
    model_names.check_drafter_name("ngram+" + BUNDLED_HEAD)
    folder = tmp_path / "a-model"
    folder.mkdir()
    model_names.check_model_name(str(folder), "target")
    (offline / "models--org--cached" / "snapshots").mkdir(parents=True)  # in the local cache: may load
    model_names.check_model_name("org/cached", "target")
    (tmp_path / "weights.bin").write_text("")
    with pytest.raises(SpecDecError, match="is a file"):
        model_names.check_model_name(str(tmp_path / "weights.bin"))
    with pytest.raises(SpecDecError, match="names no drafter"):
        model_names.check_drafter_name("ngram+")
    with pytest.raises(SpecDecError, match="target model name is empty"):
        model_names.check_pair_names(" ", None)


@pytest.mark.parametrize("argv", [
    ["generate", "--prompt", "hi", "--draft-model", "bundled:nope"],
    ["generate", "--prompt", "hi", "--target-model", "./no-such-model"],
    ["bench", "--race", "ngram,bundled:nope"],
    ["rules", "--prompt", "hi", "--draft-model", "ngram+bundled:typo"],
])
def test_the_cli_refuses_a_bad_name_before_importing_torch(argv):
    """A real process, as a user runs it: status 2, one line, and torch never imported (its import alone
    takes seconds)."""
    script = ("import sys; from specdec.cli.main import main; code = main(sys.argv[1:]); "
              "print('torch' in sys.modules); sys.exit(code)")
    result = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True,
                            cwd=ROOT, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stdout.strip() == "False"  # torch not imported
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: could not load model")
