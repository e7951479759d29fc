"""Variants: other ways to draft. Prompt lookup (n-grams) vs a draft model, and what else exists."""

import json
from dataclasses import replace

import streamlit as st

from app_pages import ui
from app_pages.student import md_escape
from specdec.config import Settings
from specdec.measure import drafter_race, timing
from specdec.models.pair import ModelPair
from specdec.paths import ASSETS
from specdec.views import charts
from specdec.views.memory import memory_line
from specdec.views.stepper import ACCEPTED, BONUS, RESAMPLED
from specdec.views.tokens import token_label

COPY_HEAVY = ASSETS / "prompt_sets" / "copy_heavy.json"
# The demo's first prompt: "Repeat this sentence exactly three times", which the target copies at T = 0,
# so lookup has something to copy (a list-copying prompt did not: the target wrote its own list;
# docs/LOG.md, "Figures that lived in code comments").
DEFAULT_COPY_PROMPT = 0
REDRAW_EVERY = 8  # passes between redraws of the live chart: drawing costs more than a pass
FEATURE_HEAD_PICTURE = """digraph {
  rankdir=LR; node [shape=box, style="rounded,filled", fillcolor="#f5f5f5", fontname="sans-serif"];
  f [label="target's hidden state\\nat position t\\n(from the verify pass)", fillcolor="#bbdefb"];
  e [label="embedding of\\ntoken t+1"];
  head [label="decoder layers\\n(the feature head)", fillcolor="#ffe0b2"];
  fhat [label="predicted hidden state\\nat t+1"];
  lm [label="target's output head", fillcolor="#bbdefb"];
  q [label="q: draft token t+2"];
  f -> head; e -> head; head -> fhat; fhat -> lm; lm -> q;
  fhat -> head [label=" next draft", style=dashed];
}"""
EARLY_EXIT_WORDS = (
    "**Self-speculation** needs no second model. **LayerSkip** (Elhoushi et al. 2024) drafts with the target "
    "cut short. A token goes through the target's first L layers only, then the target's own final norm "
    "and output head. Verification runs every layer. The draft's layers *are* the target's first layers, "
    "so their keys and values for every verified token are already in the target's KV cache. The draft "
    "reads that one cache and writes its drafts into it; they are cut off again before the target "
    "verifies. The cache is never held twice. With an fp32 target on a CPU, a drafted token goes through "
    "a copy of those L layers rounded to int8. Reading the weights is what a token costs there, and int8 "
    "is a quarter of fp32's bytes. The rounding changes q, never the verified entries in the cache."
)
EXIT_ADAPTER_WORDS = (
    "Untrained (`early:L`, the *early exit* lane above), layer L's state is not what the output head was "
    "trained to read, and the guesses are poor. **Kangaroo** (Liu et al. 2024) puts a small trained "
    "adapter between layer L and the head. Here it is two decoder layers that start as the draft's, "
    "trained on a 2-core CPU: the *exit adapter* lane."
)
OTHER_WAYS = """
- **Self-speculation: Medusa** (Cai et al. 2024) adds a few extra heads to the target itself; head *i*
  predicts the token *i+1* positions ahead from the target's last hidden state. No second model to
  load or keep in step; the heads' guesses are verified in the same kind of single pass (often as a
  small tree of candidates).
- **Multi-token prediction** (Gloeckle et al. 2024; DeepSeek-V3) trains the model to predict several
  future tokens at once; at inference the extra predictions serve as drafts for the model itself.
- All of these keep the rule you saw in *The guarantee*: whatever proposes the tokens, the target's
  verification decides, so the output distribution is the target's.
"""


def pair_with(pair: ModelPair, drafter: str) -> ModelPair:
    """The loaded target with another drafter, from the server's one set of models (no second target)."""
    return ui.pair_for(pair.target.name, drafter)


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
    st.session_state.setdefault("_va_prompt", prompts[DEFAULT_COPY_PROMPT])

    def use_prompt() -> None:
        if st.session_state.get("_va_pick") is not None:
            st.session_state["_va_prompt"] = prompts[st.session_state["_va_pick"]]

    shown = st.session_state["_va_prompt"].strip().splitlines()[:1] or [""]
    with ui.inputs_box(f"Prompt: {md_escape(shown[0][:70])}"):  # untrusted text in a label
        st.selectbox(
            "Copy-heavy prompts", range(len(prompts)), format_func=lambda i: prompts[i][:90], index=None,
            key="_va_pick", on_change=use_prompt, placeholder="pick one, or edit below",
        )
        st.text_area("Prompt", value=st.session_state["_va_prompt"], key="_va_prompt", height=110,
                     max_chars=ui.server_limits().max_prompt_chars)
    return st.session_state["_va_prompt"]


def race_settings(settings: Settings) -> Settings:
    """The sidebar's settings at this race's own temperature: 0 by default, where the target copies what
    the prompt asks it to copy (at 1 it often rephrases, and lookup finds little to copy)."""
    temperature = st.number_input(
        "Temperature (this race)", 0.0, 2.0, 0.0, step=0.1, key="_va_temp",
        help="0 = greedy: the target copies where the prompt asks it to, which is where lookup shines",
    )
    return replace(settings, sampling=replace(settings.sampling, temperature=float(temperature)))


def lookup_words(rows: list[dict], temperature: float) -> str:
    """What this race showed for prompt lookup, in its numbers."""
    row = next((r for r in rows if r["drafter"] == "n-gram lookup"), None)
    if row is None:
        return ""
    words = (f"Here **n-gram lookup made {row['tokens_per_pass']:.2f} tokens per target pass** "
             f"({row['speedup']:.2f}× the target alone) at temperature {temperature:g}.")
    if row["tokens_per_pass"] < 1.5:
        words += (" Little to copy this time: the answer did not repeat the prompt"
                  + (" (at this temperature the target often rephrases; try 0)." if temperature > 0 else "."))
    return words


def compare(pair: ModelPair, lanes: dict, prompt_ids: list[int], settings: Settings, clicked: bool, slot):
    """Runs the race live when clicked (redrawing `slot`); returns (rows, finished, runs) if run."""
    key = (pair.target.name, tuple((label, p.drafter_name) for label, (p, _, _) in lanes.items()),
           tuple(prompt_ids), settings)
    results = st.session_state["_va_results"]
    if clicked:
        runs = {}
        for passes, runs in enumerate(timing.race_lanes(lanes, prompt_ids), start=1):
            if passes % REDRAW_EVERY == 0:
                race_chart(slot, runs, str(passes))
            if st.session_state.get("_va_stop"):
                break
        if runs:
            plain = runs[timing.TARGET]
            rows = [timing.drafter_row(run, plain, lanes[label][0]) for label, run in runs.items()]
            results[key] = (rows, all(run.finished for run in runs.values()), runs)
    return results.get(key)


def race_chart(slot, runs: dict, tag: str) -> None:
    with slot.container():
        ui.chart(charts.race_chart({label: timing.race_points(run) for label, run in runs.items()}),
                 key=f"_va_race{tag}")


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


def show(pair: ModelPair, rows: list[dict], finished: bool, runs: dict, settings: Settings, slot) -> None:
    if not finished:
        st.warning("Stopped: the numbers below cover the tokens produced so far.")
    race_chart(slot, runs, "final")
    ui.chart(charts.drafter_chart(rows))
    st.markdown(lookup_words(rows, settings.sampling.temperature))
    st.markdown(ui.TOKEN_CSS, unsafe_allow_html=True)
    for tab, row in zip(st.tabs([row["drafter"] for row in rows]), rows, strict=True):
        with tab:
            drafter_column(pair, row)
    st.markdown(
        ui.legend() + '<div class="sd-legend">Uncoloured: nothing was drafted that round (the lookup '
        "found no earlier match, or the token budget left no room), so that token came from a plain "
        "target step.</div>",
        unsafe_allow_html=True,
    )
    if settings.sampling.temperature > 0:
        st.caption(
            "At temperature > 0 the texts differ from run to run (each draws its own random numbers); "
            "all follow the target's distribution. At temperature 0 they are identical."
        )


def feature_head() -> None:
    st.header("A drafter that reads the target's features")
    st.markdown(
        "**EAGLE** (Li et al. 2024) drafts with one light transformer layer. It reads each token's "
        "embedding beside the target's **hidden state** one position back, which the verification pass "
        "computes anyway. It predicts the next hidden state, and the target's own output head turns that "
        "into q. It then drafts on from its own predicted states, at the cost of one layer per drafted "
        "token. After a rejection the target's states roll back with its KV cache, and the head reads "
        "them again."
    )
    st.markdown(
        "The race above has one: the **feature head** lanes use the head shipped with the bundled target. "
        "With 7–13B targets and hours of GPU training, EAGLE's heads agree with the target more often than "
        "separate small drafts do. This one is small: two layers, started from the project's draft model "
        "and trained on a 2-core CPU."
    )
    with st.expander("The shipped head in detail"):
        st.markdown(
            "It started as the project's 2-layer draft model and was trained for 40 minutes to read the "
            "target's hidden state too. On the command line it is "
            "`--draft-model bundled:SmolLM2-135M-Instruct-head`. Its measured acceptance and speed beside "
            "the other drafters, with the exact command and the machine, are in `docs/benchmarks.md`; "
            "the race above measures it here, now."
        )
    st.graphviz_chart(FEATURE_HEAD_PICTURE, width="stretch" if ui.presenter() else "content")


def early_exit(pair: ModelPair) -> None:
    st.header("The target's own early layers as the draft")
    st.markdown(EARLY_EXIT_WORDS)
    st.markdown(EXIT_ADAPTER_WORDS)
    depth = pair.target.model.config.num_hidden_layers
    if depth > 1:
        layer = min(drafter_race.RACED_EXIT_LAYER, depth - 1)
        ui.chart(charts.early_exit_chart(depth, layer), key="_va_exit_picture")
    shelf = ui.pair_shelf()
    if line := memory_line(shelf.resident_added, pair.target.name, shelf.own_bytes):
        ui.note(line)


ui.init_state()
st.session_state.setdefault("_va_results", {})
intro()
prompt = choose_prompt()
pair = ui.require_pair()
settings, prompt_ids = ui.require_prompt(pair, prompt)
settings = race_settings(settings)
lanes, lanes_note = drafter_race.lanes_to_race(pair, settings, lambda drafter: pair_with(pair, drafter))
if lanes_note == drafter_race.NO_DRAFT_MODEL:
    st.info(lanes_note)
elif lanes_note:
    st.error(lanes_note, icon=":material/error:")
clicked = ui.run_stop_buttons("Race the drafters", "b_variants", "b_va_stop", "_va_stop")
chart_slot = st.empty()  # under the buttons: the live race draws here
compared = compare(pair, lanes, prompt_ids, settings, clicked, chart_slot)
if compared is None:
    st.info("Press **Race the drafters**: the target alone and each drafter on the same prompt and "
            "settings, side by side, each advancing by its own compute time.")
else:
    show(pair, *compared, settings, chart_slot)
feature_head()
early_exit(pair)
st.header("Other ways to draft")
st.markdown(OTHER_WAYS)
