"""A first run: the cache folders are built from nothing, a broken set-up or a half-written cache folder
is one clear message or a rebuild, never a traceback, and the converted target is the GGUF's weights.

The fast tests simulate the failures (a package hidden from import, a write that stops half-way); the
slow ones convert the bundled GGUF for real, into a temporary cache.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import gguf
import pytest
import streamlit as st
import torch
from safetensors.torch import load_file
from streamlit.testing.v1 import AppTest

from specdec.cli.main import main
from specdec.errors import SpecDecError
from specdec.models import loading
from specdec.paths import BUNDLED_TARGET

ROOT = Path(__file__).resolve().parents[2]
TARGET_FOLDER = "SmolLM2-135M-Instruct"


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    cache = tmp_path / "specdec-cache"
    monkeypatch.setenv("SPECDEC_CACHE", str(cache))
    return cache


@pytest.fixture
def without_accelerate(monkeypatch):
    """As if `accelerate` were not installed: a None entry in sys.modules makes its import fail."""
    monkeypatch.setitem(sys.modules, "accelerate", None)


def _write_files(contents: dict[str, bytes]):
    def write(staging: Path) -> None:
        for name, data in contents.items():
            (staging / name).write_bytes(data)

    return write


# --- the cache folder: trusted only when complete ---------------------------------------------------


def test_a_cache_folder_is_written_once_and_then_reused(tmp_path):
    folder = tmp_path / "model"
    loading.cached_folder(folder, _write_files({"weights": b"12345", "config.json": b"{}"}))
    assert (folder / "weights").read_bytes() == b"12345"
    loading.cached_folder(folder, lambda staging: pytest.fail("a complete folder is rebuilt"))
    assert not list(tmp_path.glob(".writing-*")) and not list(tmp_path.glob(".discarded-*"))


@pytest.mark.parametrize("damage", ["no marker", "truncated file", "missing file"])
def test_a_half_written_cache_folder_is_rebuilt_not_trusted(tmp_path, damage):
    folder = tmp_path / "model"
    loading.cached_folder(folder, _write_files({"weights": b"12345", "config.json": b"{}"}))
    if damage == "no marker":  # what an interrupted copy, or an older specdec, leaves behind
        (folder / loading.COMPLETE_MARKER).unlink()
    elif damage == "truncated file":
        (folder / "weights").write_bytes(b"12")
    else:
        (folder / "weights").unlink()
    loading.cached_folder(folder, _write_files({"weights": b"67890", "config.json": b"{}"}))
    assert (folder / "weights").read_bytes() == b"67890"
    assert loading._is_complete(folder)


def test_a_write_that_fails_half_way_leaves_nothing_to_trust(tmp_path):
    folder = tmp_path / "model"

    def interrupted(staging: Path) -> None:
        (staging / "config.json").write_text("{}")
        raise KeyboardInterrupt  # Ctrl-C in the middle of a conversion

    with pytest.raises(KeyboardInterrupt):
        loading.cached_folder(folder, interrupted)
    assert not folder.exists()
    assert list(tmp_path.iterdir()) == []  # no staging folder left either


# --- a missing package: one line that says what to do -------------------------------------------------


def test_missing_conversion_package_is_one_clear_error(empty_cache, without_accelerate):
    with pytest.raises(SpecDecError, match=r"needs the package\(s\) accelerate: run ./start.sh"):
        loading.load_model(BUNDLED_TARGET)
    assert not (empty_cache / TARGET_FOLDER).exists()


def test_a_conversion_that_fails_inside_transformers_is_one_line(empty_cache, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("something in the GGUF reader broke\nand a second line nobody needs")

    monkeypatch.setattr(loading.AutoTokenizer, "from_pretrained", broken)
    with pytest.raises(SpecDecError) as caught:
        loading.load_model(BUNDLED_TARGET)
    assert "\n" not in str(caught.value)
    assert "something in the GGUF reader broke; run ./start.sh" in str(caught.value)
    assert not (empty_cache / TARGET_FOLDER).exists()
    assert not list(empty_cache.glob(".writing-*"))


def test_cli_missing_package_is_one_line_and_status_2(empty_cache, without_accelerate, capsys):
    assert main(["generate", "--prompt", "def f():", "--max-new-tokens", "4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "accelerate" in err


@pytest.mark.slow  # a fresh Python process importing torch and transformers, ~3 s
def test_cli_in_a_real_process_without_the_package_prints_no_traceback(tmp_path):
    """The whole program, as a user runs it, with `accelerate` hidden from import."""
    code = ("import sys; sys.modules['accelerate'] = None; from specdec.cli.main import main; "
            "sys.exit(main(sys.argv[1:]))")
    env = {"SPECDEC_CACHE": str(tmp_path / "cache"), "HF_HOME": str(tmp_path / "hf"),
           "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code, "generate", "--prompt", "hello"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0 and "accelerate" in done.stderr


@pytest.mark.slow  # about a second on a 2-core machine: the whole suite runs it
def test_app_shows_the_failure_in_page_and_sidebar_with_a_retry(empty_cache, without_accelerate, monkeypatch):
    monkeypatch.delenv("SPECDEC_DRAFTER", raising=False)
    monkeypatch.setenv("SPECDEC_TARGET", BUNDLED_TARGET)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("app_pages/rounds.py").run()
    assert not at.exception
    for place in (at.main, at.sidebar):
        assert len(place.error) == 1 and "accelerate" in place.error[0].value
        assert "./start.sh" in place.error[0].value
        assert [b.label for b in place.button] == ["Retry loading"]
    at.main.button[0].click().run()  # still missing: the same message again, and still no traceback
    assert not at.exception and "accelerate" in at.main.error[0].value


# --- the real conversion, from an empty cache --------------------------------------------------------


def _dequantized(reader: gguf.GGUFReader, name: str) -> torch.Tensor:
    tensor = next(t for t in reader.tensors if t.name == name)
    return torch.from_numpy(gguf.quants.dequantize(tensor.data, tensor.tensor_type).copy())


def _unpermute(weight: torch.Tensor, heads: int) -> torch.Tensor:
    """llama.cpp's converter interleaves the rotary halves of q and k rows per head; undo that."""
    return weight.reshape(heads, weight.shape[0] // heads // 2, 2, -1).swapaxes(1, 2).reshape(weight.shape)


@pytest.mark.slow  # converts the bundled GGUF (~20 s)
def test_first_conversion_gives_the_gguf_tensors_exactly(empty_cache):
    folder = loading.bundled_target_folder()
    assert loading._is_complete(folder)
    converted = load_file(folder / "model.safetensors")
    reader = gguf.GGUFReader(loading.bundled_gguf())
    heads = int(reader.fields["llama.attention.head_count"].parts[-1][0])
    kv_heads = int(reader.fields["llama.attention.head_count_kv"].parts[-1][0])
    expected = {
        "model.embed_tokens.weight": _dequantized(reader, "token_embd.weight"),  # Q8_0
        "model.layers.0.mlp.down_proj.weight": _dequantized(reader, "blk.0.ffn_down.weight"),  # Q4_1
        "model.layers.17.self_attn.v_proj.weight": _dequantized(reader, "blk.17.attn_v.weight"),
        "model.layers.0.self_attn.q_proj.weight": _unpermute(
            _dequantized(reader, "blk.0.attn_q.weight"), heads
        ),
        "model.layers.29.self_attn.k_proj.weight": _unpermute(
            _dequantized(reader, "blk.29.attn_k.weight"), kv_heads
        ),
        "model.layers.5.input_layernorm.weight": _dequantized(reader, "blk.5.attn_norm.weight"),  # F32
        "model.norm.weight": _dequantized(reader, "output_norm.weight"),
    }
    for name, tensor in expected.items():
        assert converted[name].dtype == torch.float32
        assert torch.equal(converted[name], tensor.float()), name
    # The negative control: without undoing the interleave, q differs.
    raw_q = _dequantized(reader, "blk.0.attn_q.weight")
    assert not torch.equal(converted["model.layers.0.self_attn.q_proj.weight"], raw_q)


@pytest.fixture(scope="module")
def converted_once(tmp_path_factory):
    """One complete conversion (the suite's own cache), copied into each test's empty cache."""
    return loading.bundled_target_folder()


@pytest.mark.slow  # converts the bundled GGUF again (~20 s)
def test_cli_rebuilds_a_cache_folder_left_half_written(empty_cache, converted_once, capsys):
    folder = empty_cache / TARGET_FOLDER
    shutil.copytree(converted_once, folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 3])  # the write stopped here
    assert main(["generate", "--prompt", "def square(x):", "--max-new-tokens", "6", "--drafter", "ngram",
                 "--temperature", "0"]) == 0
    assert capsys.readouterr().out.strip()
    assert weights.stat().st_size == (converted_once / "model.safetensors").stat().st_size
    assert loading._is_complete(folder)


@pytest.mark.slow  # converts the bundled GGUF again (~20 s)
def test_a_damaged_cache_file_of_the_right_size_is_rebuilt_on_load(empty_cache, converted_once):
    folder = empty_cache / TARGET_FOLDER
    shutil.copytree(converted_once, folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(b"\0" * weights.stat().st_size)  # right size, wrong bytes: the marker can't tell
    model = loading.load_model(BUNDLED_TARGET)
    assert model.vocab_size == 49152
    assert weights.read_bytes()[:8] != b"\0" * 8


@pytest.mark.slow  # converts the bundled GGUF again (~20 s) inside the app
def test_app_rebuilds_a_half_written_cache_and_shows_the_round_view(empty_cache, converted_once, monkeypatch):
    folder = empty_cache / TARGET_FOLDER
    shutil.copytree(converted_once, folder)
    (folder / loading.COMPLETE_MARKER).unlink()  # as an interrupted copy leaves it
    monkeypatch.setenv("SPECDEC_TARGET", BUNDLED_TARGET)
    monkeypatch.setenv("SPECDEC_DRAFTER", "ngram")
    st.cache_resource.clear()  # a pair loaded by an earlier test in this process would hide the rebuild
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    at.switch_page("app_pages/rounds.py").run()
    assert not at.exception and not at.error and not at.sidebar.error
    assert loading._is_complete(folder)
    assert any("Step" in b.label for b in at.button)
