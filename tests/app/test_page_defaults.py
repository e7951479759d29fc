"""Each page's claim shows at its defaults: Round by round's first ready prompt rejects a draft within
three Steps, at a pace that shows a round in about 2 s; Variants' lookup demo copies (temperature 0, the
default copy-heavy prompt) at more than 1.5 tokens per pass. The claims with the bundled pair are slow."""

import ast
import json
from dataclasses import replace
from pathlib import Path

import pytest
from app_driver import assert_clean, make_app

from specdec.config import SamplingConfig, Settings
from specdec.views import playback

ROOT = Path(__file__).resolve().parents[2]
ROUNDS, VARIANTS = "app_pages/rounds.py", "app_pages/variants.py"


def page_constant(page: str, name: str):
    """A literal constant of a page script, read without running the page."""
    tree = ast.parse((ROOT / page).read_text(encoding="utf-8"))
    return next(ast.literal_eval(node.value) for node in tree.body
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name)


def test_a_step_shows_its_round_in_about_two_seconds_at_the_default_pace(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, ROUNDS)
    assert_clean(at)
    speeds = playback.SPEEDS
    beats = Settings().gamma - 1 + 4  # stage 1 reveals the drafts one by one, then stages 2 to 5
    assert speeds[at.session_state["speed"]] * beats <= 2.5
    assert at.session_state["animate_stages"]  # the staged animation stays, at a brisk pace
    assert max(speeds.values()) * beats >= 7  # and slower paces remain for talking over each stage


@pytest.mark.slow  # about a second on a 2-core machine: the whole suite runs it
def test_variants_races_at_temperature_zero_and_reads_lookup_numbers(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, VARIANTS, max_new_tokens=8)
    assert at.number_input(key="_va_temp").value == 0.0
    at.button(key="b_variants").click().run()
    assert_clean(at)
    assert any("n-gram lookup made" in m.value and "at temperature 0" in m.value for m in at.markdown)


@pytest.mark.slow
def test_the_first_ready_prompt_rejects_a_draft_within_three_steps(bundled_pair):
    """The Stack prompt: its first round rejected a draft, both with the passes priced alike (as here)
    and timed at load (as the app does; tests/browser/test_browser_headlines.py checks it in the
    browser). The palindrome prompt, first before, kept every draft in rounds 1-3 here."""
    from specdec.views.stepper import Stepper

    prompt = next(iter(json.loads((ROOT / "assets/ready_prompts.json").read_text()).values()))[0]
    settings = Settings()  # the sidebar's defaults
    prompt_ids = bundled_pair.encode_prompt(prompt, True, settings.max_new_tokens)
    stepper = Stepper(bundled_pair, prompt_ids, settings)
    rounds = [stepper.step() for _ in range(3)]
    assert any(r.num_accepted < r.num_drafted for r in rounds if r is not None), \
        [(r.num_accepted, r.num_drafted) for r in rounds if r is not None]


@pytest.mark.slow
def test_lookup_copies_on_the_variants_default_prompt(bundled_pair):
    from specdec.models.pair import NGRAM
    from specdec.models.runs import generate

    prompts = json.loads((ROOT / "assets/prompt_sets/copy_heavy.json").read_text())["prompts"]
    default = prompts[page_constant(VARIANTS, "DEFAULT_COPY_PROMPT")]  # the page's default prompt
    # The page's n-gram lane: the sidebar's defaults, a fixed length, at the race's temperature 0
    settings = replace(Settings(), adaptive=False, sampling=SamplingConfig(0.0))
    lookup = bundled_pair.with_drafter(NGRAM)
    result = generate(lookup, lookup.encode_prompt(default, True, settings.max_new_tokens), settings,
                      detail=False)
    assert result.metrics["tokens_per_pass"] > 1.5, result.metrics
