"""Variants: other ways to draft. Prompt lookup (n-grams) vs a draft model, and what else exists."""

import json
from pathlib import Path

import streamlit as st

from app_pages import ui
from specdec import charts
from specdec import experiments as ex
from specdec.errors import SpecDecError
from specdec.models import BUNDLED_DRAFT, BUNDLED_TARGET, SHIPPED_DRAFT
from specdec.pair import NGRAM
from specdec.stepper import ACCEPTED, BONUS, RESAMPLED, token_label

COPY_HEAVY = Path(__file__).resolve().parent.parent / "assets" / "prompt_sets" / "copy_heavy.json"
CHART_CONFIG = {"displayModeBar": False}

ui.init_state()
state = st.session_state
prompts = json.loads(COPY_HEAVY.read_text(encoding="utf-8"))["prompts"]
state.setdefault("_va_prompt", prompts[1])
state.setdefault("_va_results", {})

st.title("Variants")
st.markdown(
    "The draft does not have to be a smaller model. **Prompt lookup** drafts by copying: find the last "
    "few tokens earlier in the text and propose what followed them. It costs nothing and shines when "
    "the answer repeats the prompt (summarise, edit, repeat); a draft model guesses everywhere, at a price."
)


def _use_prompt() -> None:
    if state.get("_va_pick") is not None:
        state["_va_prompt"] = prompts[state["_va_pick"]]


st.selectbox(
    "Copy-heavy prompts",
    range(len(prompts)),
    format_func=lambda i: prompts[i][:90],
    index=None,
    key="_va_pick",
    on_change=_use_prompt,
    placeholder="pick one, or edit below",
)
st.text_area("Prompt", key="_va_prompt", height=110)

pair = ui.require_pair()


@st.cache_resource(show_spinner=False, max_entries=2)
def _pair_with(target: str, drafter: str, _pair):
    return ex.with_drafter(_pair, drafter)


# The drafters compared: n-gram, the sidebar's draft model, and the trained bundled draft.
drafters = {"n-gram lookup": NGRAM}
if pair.draft is not None:
    drafters[f"model: {pair.draft.name}"] = pair.draft.name
notes = []
if pair.target.name == BUNDLED_TARGET and BUNDLED_DRAFT not in drafters.values():
    if (SHIPPED_DRAFT / "draft-layers.safetensors").exists():
        drafters[f"model: {BUNDLED_DRAFT}"] = BUNDLED_DRAFT
    else:
        notes.append(
            f"The trained draft **{BUNDLED_DRAFT}** is not here yet (train it with "
            "`python -m specdec train-draft`), so only the drafters configured are compared."
        )
if len(drafters) == 1:
    notes.append("No draft model is configured: set one in the sidebar's *Drafter* box to compare it.")
for note in notes:
    st.info(note)

try:
    settings = ui.current_settings()
    prompt_ids = pair.encode_prompt(state["_va_prompt"], bool(state["chat"]), settings.max_new_tokens)
except SpecDecError as error:
    st.error(str(error), icon=":material/error:")
    st.stop()
key = (pair.target.name, tuple(drafters.values()), tuple(prompt_ids), settings)

clicked = ui.run_stop_buttons("Compare drafters", "b_variants", "b_va_stop", "_va_stop")
if clicked:
    pairs = {}
    for label, name in drafters.items():
        try:
            pairs[label] = _pair_with(pair.target.name, name, pair)
        except SpecDecError as error:
            st.error(f"{label}: {error}", icon=":material/error:")
    progress = st.progress(0.0, text="target only…")
    rows = []
    for row in ex.compare_drafters(pairs, prompt_ids, settings, should_stop=lambda: state.get("_va_stop")):
        rows.append(row)
        progress.progress(len(rows) / (len(pairs) + 1), text=f"{row['drafter']}: {row['speedup']:.2f}x")
    progress.empty()
    state["_va_results"][key] = rows

rows = state["_va_results"].get(key)
if not rows:
    st.info("Press **Compare drafters**: the target alone, then each drafter, same prompt and settings.")
else:
    st.plotly_chart(charts.drafter_chart(rows), config=CHART_CONFIG)
    st.markdown(ui.TOKEN_CSS, unsafe_allow_html=True)
    cols = st.columns(len(rows))
    for col, row in zip(cols, rows, strict=True):
        with col:
            st.markdown(f"**{row['drafter']}**")
            acceptance = "–" if row["acceptance_rate"] is None else f"{row['acceptance_rate']:.0%}"
            st.caption(
                f"{row['tokens_per_second']:.1f} tokens/s · {row['speedup']:.2f}x · acceptance "
                f"{acceptance} · {row['tokens_per_pass']:.2f} tokens/pass · "
                f"{row['drafted_per_round']:.1f} drafted/round"
            )
            if "origins" in row:
                chips = []
                for emitted, accepted, bonus, drafted in row["origins"]:
                    for i, token in enumerate(emitted):
                        origin = ACCEPTED if i < accepted else BONUS if bonus else RESAMPLED
                        style = ui.ORIGIN_STYLE[origin] if drafted else ""  # nothing drafted: a plain step
                        chips.append(ui.token_chip(token_label(pair, token), style=style))
                st.markdown(f'<div class="sd-line">{"".join(chips)}</div>', unsafe_allow_html=True)
            else:
                st.code(row["text"], language=None, wrap_lines=True)
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

st.header("Other ways to draft")
st.markdown(
    """
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
)
