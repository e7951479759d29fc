"""Variants: other ways to draft. Prompt lookup (n-grams) vs a draft model, and what else exists."""

import json

import streamlit as st

from app_pages import ui
from specdec.config import Settings
from specdec.errors import SpecDecError
from specdec.lab import charts, timing
from specdec.lab.stepper import ACCEPTED, BONUS, RESAMPLED
from specdec.lab.tokens import token_label
from specdec.models.loading import shipped_draft_exists
from specdec.models.pair import NGRAM, ModelPair
from specdec.paths import ASSETS, BUNDLED_DRAFT, BUNDLED_TARGET

COPY_HEAVY = ASSETS / "prompt_sets" / "copy_heavy.json"
OTHER_WAYS = """
- **Self-speculation: Medusa** (Cai et al. 2024) adds a few extra heads to the target itself; head *i*
  predicts the token *i+1* positions ahead from the target's last hidden state. No second model to
  load or keep in step; the heads' guesses are verified in the same kind of single pass (often as a
  small tree of candidates).
- **EAGLE** (Li et al. 2024) drafts with one light transformer layer that reads the target's own
  features (hidden states), not just tokens, so its guesses agree with the target far more often
  than a separate small model's.
- **Multi-token prediction** (Gloeckle et al. 2024; DeepSeek-V3) trains the model to predict several
  future tokens at once; at inference the extra predictions serve as drafts for the model itself.
- All of these keep the rule you saw in *The guarantee*: whatever proposes the tokens, the target's
  verification decides, so the output distribution is the target's.
"""


@st.cache_resource(show_spinner=False, max_entries=2)
def pair_with(target: str, drafter: str, _pair: ModelPair) -> ModelPair:
    """The loaded target with another drafter, once per process (the names are the cache key)."""
    return _pair.with_drafter(drafter)


def intro() -> None:
    st.title("Variants")
    st.markdown(
        "The draft does not have to be a smaller model. **Prompt lookup** drafts by copying: find the "
        "last few tokens earlier in the text and propose what followed them. It costs nothing and shines "
        "when the answer repeats the prompt (summarise, edit, repeat); a draft model guesses everywhere, "
        "at a price."
    )


def choose_prompt() -> str:
    prompts = json.loads(COPY_HEAVY.read_text(encoding="utf-8"))["prompts"]
    st.session_state.setdefault("_va_prompt", prompts[1])

    def use_prompt() -> None:
        if st.session_state.get("_va_pick") is not None:
            st.session_state["_va_prompt"] = prompts[st.session_state["_va_pick"]]

    st.selectbox(
        "Copy-heavy prompts", range(len(prompts)), format_func=lambda i: prompts[i][:90], index=None,
        key="_va_pick", on_change=use_prompt, placeholder="pick one, or edit below",
    )  # fmt: skip
    st.text_area("Prompt", key="_va_prompt", height=110, max_chars=ui.server_limits().max_prompt_chars)
    return st.session_state["_va_prompt"]


def drafters_to_compare(pair: ModelPair) -> dict[str, str]:
    """label -> drafter name: n-gram, the sidebar's draft model, and the bundled target's trained draft."""
    drafters = {"n-gram lookup": NGRAM}
    if pair.draft is not None:
        drafters[f"model: {pair.draft.name}"] = pair.draft.name
    if pair.target.name == BUNDLED_TARGET and BUNDLED_DRAFT not in drafters.values():
        if shipped_draft_exists():
            drafters[f"model: {BUNDLED_DRAFT}"] = BUNDLED_DRAFT
        else:
            st.info(
                f"The trained draft **{BUNDLED_DRAFT}** is not here (train it with "
                "`python -m specdec train-draft`), so only the drafters configured are compared."
            )
    if len(drafters) == 1:
        st.info("No draft model is configured: set one in the sidebar's *Drafter* box to compare it.")
    return drafters


def compare(pair: ModelPair, drafters: dict[str, str], prompt_ids: list[int], settings: Settings):
    """The compare button; returns (rows, finished) for this prompt and these settings, if run."""
    key = (pair.target.name, tuple(drafters.values()), tuple(prompt_ids), settings)
    results = st.session_state["_va_results"]
    if ui.run_stop_buttons("Compare drafters", "b_variants", "b_va_stop", "_va_stop"):
        pairs = {}
        for label, name in drafters.items():
            try:
                pairs[label] = pair_with(pair.target.name, name, pair)
            except SpecDecError as error:
                st.error(f"{label}: {error}", icon=":material/error:")
        ui.run_with_progress(
            timing.compare_drafters(pairs, prompt_ids, settings), len(pairs) + 1,
            lambda row: f"{row['drafter']}: {row['speedup']:.2f}x", "_va_stop",
            lambda rows, finished: results.__setitem__(key, (list(rows), finished)),
        )  # fmt: skip
    return results.get(key)


def drafter_column(pair: ModelPair, row: dict) -> None:
    st.markdown(f"**{row['drafter']}**")
    acceptance = "–" if row["acceptance_rate"] is None else f"{row['acceptance_rate']:.0%}"
    st.caption(
        f"{row['tokens_per_second']:.1f} tokens/s · {row['speedup']:.2f}x · acceptance {acceptance} · "
        f"{row['tokens_per_pass']:.2f} tokens/pass · {row['drafted_per_round']:.1f} drafted/round"
    )
    if "origins" not in row:
        st.code(row["text"], language=None, wrap_lines=True)
        return
    chips = []
    for emitted, accepted, bonus, drafted in row["origins"]:
        for i, token in enumerate(emitted):
            origin = ACCEPTED if i < accepted else BONUS if bonus else RESAMPLED
            style = ui.ORIGIN_STYLE[origin] if drafted else ""  # nothing drafted: a plain step
            chips.append(ui.token_chip(token_label(pair, token), style=style))
    st.markdown(f'<div class="sd-line">{"".join(chips)}</div>', unsafe_allow_html=True)


def show(pair: ModelPair, rows: list[dict], finished: bool, settings: Settings) -> None:
    if not finished:
        st.warning("Stopped: the drafters below are those measured so far.")
    ui.chart(charts.drafter_chart(rows))
    st.markdown(ui.TOKEN_CSS, unsafe_allow_html=True)
    for column, row in zip(st.columns(len(rows)), rows, strict=True):
        with column:
            drafter_column(pair, row)
    st.markdown(
        ui.legend() + '<div class="sd-legend">Uncoloured: the drafter proposed nothing '
        "(no earlier match), so that token came from a plain target step.</div>",
        unsafe_allow_html=True,
    )
    if settings.sampling.temperature > 0:
        st.caption(
            "At temperature > 0 the texts differ from run to run (each draws its own random numbers); "
            "all follow the target's distribution. At temperature 0 they are identical."
        )


ui.init_state()
st.session_state.setdefault("_va_results", {})
intro()
prompt = choose_prompt()
pair = ui.require_pair()
drafters = drafters_to_compare(pair)
settings, prompt_ids = ui.require_prompt(pair, prompt)
compared = compare(pair, drafters, prompt_ids, settings)
if compared is None:
    st.info("Press **Compare drafters**: the target alone, then each drafter, same prompt and settings.")
else:
    show(pair, *compared, settings)
st.header("Other ways to draft")
st.markdown(OTHER_WAYS)
