"""A new user's first run, in a real browser: ./start.sh with empty model and Hugging Face caches serves
a round view that converts the bundled target on its first page, then steps.

As a script it prints the first-run figures the README gives:
    PYTHONPATH=.:scripts:tests/support python tests/browser/test_browser_first_run.py
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest
from browser_driver import (
    ARTIFACTS,
    CHROMIUM,
    browser_page,
    metric,
    set_animation,
    step,
    streamlit_server,
    wait_idle,
)

from specdec.models.loading import COMPLETE_MARKER
from specdec.paths import BUNDLED_TARGET

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,  # converts the bundled GGUF in a real server, driven by a real browser
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium at /usr/bin/chromium"),
]
PROMPT = "Write a Python function that returns the square of a number."
FIRST_PAGE_TIMEOUT_MS = 300_000  # the conversion takes ~20 s alone; a busy CI machine is slower


def first_run(cache_root: Path) -> dict[str, float]:
    """Start ./start.sh with empty caches under `cache_root`, open the round view, step twice.
    Returns the seconds to the server's health answer, to the first page with models, and per Step."""
    # Empty caches, and the default models whatever the test's environment says.
    env = {"SPECDEC_CACHE": str(cache_root / "specdec"), "HF_HOME": str(cache_root / "huggingface"),
           "SPECDEC_TARGET": BUNDLED_TARGET, "SPECDEC_DRAFTER": ""}
    ARTIFACTS.mkdir(exist_ok=True)
    started = time.monotonic()
    with streamlit_server(env, timeout=600, start_script=True) as base, browser_page() as page:
        server_up = time.monotonic() - started
        opened = time.monotonic()
        page.goto(f"{base}/rounds?{urlencode({'prompt': PROMPT, 'seed': '1'})}")
        step_button = page.get_by_role("button", name=re.compile("Step"))
        failed = page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]')
        step_button.or_(failed).first.wait_for(timeout=FIRST_PAGE_TIMEOUT_MS)
        first_page = time.monotonic() - opened
        page.screenshot(path=ARTIFACTS / "first-run-first-page.png", full_page=True)
        assert failed.count() == 0, failed.first.inner_text()
        wait_idle(page)
        set_animation(page, False)
        stepped = time.monotonic()
        step(page)
        step(page)
        per_step = (time.monotonic() - stepped) / 2
        assert metric(page, "Rounds") == "2"
        page.screenshot(path=ARTIFACTS / "first-run-rounds.png", full_page=True)
        sidebar = page.locator('[data-testid="stSidebar"]').inner_text()
    assert "SmolLM2-135M-Instruct" in sidebar and "error" not in sidebar.lower()
    assert (cache_root / "specdec" / "SmolLM2-135M-Instruct" / COMPLETE_MARKER).is_file()
    return {"server_up_s": server_up, "first_page_with_models_s": first_page, "step_s": per_step}


def test_start_sh_from_empty_caches_serves_a_round_view_that_steps(tmp_path):
    figures = first_run(tmp_path)
    print(figures)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as root:
        for name, seconds in first_run(Path(root)).items():
            print(f"{name}: {seconds:.1f}")
    sys.exit(0)
