"""Code vs prose: the same settings over prompt sets of different kinds; where does speculation pay?"""

import json
from dataclasses import replace

import streamlit as st

from app_pages import class_poll, ui
from app_pages.words import drafter_words
from specdec.config import Settings
from specdec.errors import SpecDecError
from specdec.measure import timing
from specdec.models.pair import ModelPair
from specdec.paths import ASSETS
from specdec.views import charts, class_questions, prompt_kinds

SETS_DIR = ASSETS / "prompt_sets"
# Code and prose first: the runs go round robin over the kinds, so the page's own question has both
# its numbers after the first two prompts.
CATEGORIES = ["code", "prose", "structured", "creative", "copy_heavy"]


@st.cache_data(show_spinner=False)
def bundled_prompt_sets() -> list[dict]:
    rows = []
    for name in CATEGORIES:
        data = json.loads((SETS_DIR / f"{name}.json").read_text(encoding="utf-8"))
        rows += [{"category": prompt_kinds.kind_words(data["name"]), "prompt": prompt}
                 for prompt in data["prompts"]]
    return rows


def intro() -> None:
    st.title("Code vs prose")
    st.markdown(
        "Speculation pays when the draft guesses right. Run prompt sets of different kinds with the same "
        "settings and compare acceptance, tokens per target pass and speed-up per kind, prompt by prompt."
    )


def chosen_sets(pair: ModelPair) -> tuple[dict[str, list[str]], Settings]:
    """The editable prompt sets, cut to N prompts per category, and the settings to run them with."""
    with ui.inputs_box("Prompt sets and run size"):
        with st.expander("Prompt sets (editable: add, change or delete rows)"):
            edited = st.data_editor(
                bundled_prompt_sets(), num_rows="dynamic", key="_cp_editor", width="stretch",
                column_config={"category": st.column_config.TextColumn(required=True),
                               "prompt": st.column_config.TextColumn(width="large", required=True)},
            )
        cols = st.columns(3)
        per_category = cols[0].number_input("Prompts per category", 1, 20, 2, key="_cp_per_cat")
        new_tokens = cols[1].number_input("New tokens per prompt", 4, 256, 32, key="_cp_tokens")
    sets: dict[str, list[str]] = {}
    for row in edited if isinstance(edited, list) else edited.to_dict("records"):
        category, prompt = str(row.get("category") or "").strip(), str(row.get("prompt") or "")
        if category and prompt.strip() and len(sets.setdefault(category, [])) < per_category:
            sets[category].append(prompt)
    sets = {name: prompts for name, prompts in sets.items() if prompts}
    try:
        settings = replace(ui.current_settings(), max_new_tokens=int(new_tokens))
        if not sets:
            raise SpecDecError("no prompts to run: give at least one row a category and a prompt")
    except SpecDecError as error:
        st.error(str(error), icon=":material/error:")
        st.stop()
    ui.note(
        f"{sum(len(p) for p in sets.values())} prompt(s) in {len(sets)} categories · drafter "
        f"**{drafter_words(pair.drafter_name)}** · γ = {settings.gamma} · temperature "
        f"{settings.sampling.temperature:g} "
        "(new tokens: this page's own)"
    )
    return sets, settings


def run_sets(pair: ModelPair, sets: dict[str, list[str]], settings: Settings) -> tuple | None:
    """The run button; returns (rows, finished) for these sets and settings, if run."""
    chat = bool(st.session_state["chat"])
    key = (pair.target.name, pair.drafter_name, settings, chat, json.dumps(sets, sort_keys=True))
    results = st.session_state["_cp_results"]
    count = sum(len(p) for p in sets.values())
    pace = f"sets:{pair.target.name}:{pair.drafter_name}:{settings.gamma}"  # seconds per new token
    if ui.run_stop_buttons("Run the prompt sets", "b_sets", "b_cp_stop", "_cp_stop"):
        st.session_state["_cp_loaded"] = None
        try:
            ui.run_with_progress(
                timing.prompt_set_runs(pair, sets, settings, chat), count,
                lambda row: f"{row['category']} · prompt {row['prompt']}: "
                f"{row['speedup']:.2f}x, acceptance {row['acceptance_rate']:.0%}",
                "_cp_stop", lambda rows, finished: results.__setitem__(key, (list(rows), finished)),
                [settings.max_new_tokens] * count, draw=lambda rows: category_charts(rows, len(rows)),
                pace_key=pace,
            )
        except SpecDecError as error:
            st.error(str(error), icon=":material/error:")
    if key not in results:
        ui.note(f"{count} prompt(s) of {settings.max_new_tokens} new tokens each, both ways: "
                   f"{ui.estimate_text(pace, count * settings.max_new_tokens)}.")
    return results.get(key)


def category_charts(rows: list[dict], tag: int | str = "") -> None:
    """The three charts per category, side by side (also drawn live, as the prompts come in)."""
    cols = st.columns(3)
    for col, (field, title, axis) in zip(cols, (
            ("acceptance_rate", "Acceptance rate", "accepted / drafted"),
            ("tokens_per_pass", "Tokens per target pass", "tokens"),
            ("speedup", "Speed-up", "x over target only")), strict=True):
        ui.chart(charts.category_chart(rows, field, title, axis), key=f"_cp_{field}{tag}" if tag else None,
                 container=col)


def reload_saved() -> dict | None:
    uploaded = st.file_uploader("Reload saved results (JSON)", type="json", key="_cp_upload")
    if uploaded is not None:
        try:
            st.session_state["_cp_loaded"] = timing.check_saved_results(json.loads(uploaded.getvalue()))
        except (ValueError, UnicodeDecodeError):
            st.error("that file is not JSON: reload a file saved by this page", icon=":material/error:")
        except SpecDecError as error:
            st.error(str(error), icon=":material/error:")
    return st.session_state["_cp_loaded"]


def results(rows: list[dict]) -> list[dict]:
    summary = timing.category_summary(rows)
    st.dataframe(
        summary, hide_index=True, width="stretch",
        column_config={
            "acceptance_rate": st.column_config.NumberColumn("acceptance (median)", format="%.2f"),
            "tokens_per_pass": st.column_config.NumberColumn("tokens/pass (median)", format="%.2f"),
            "speedup": st.column_config.NumberColumn("speed-up (median)", format="%.2fx"),
        },
    )
    category_charts(rows)
    with st.expander("Every prompt"):
        st.dataframe(prompt_kinds.prompt_rows(rows), hide_index=True, width="stretch")
    return summary


def save_button(saved: dict) -> None:
    st.download_button("Save results (JSON)", data=json.dumps(saved, indent=1),
                       file_name="specdec-prompt-sets.json", mime="application/json", key="b_cp_save",
                       on_click="ignore")


def quiz(summary: list[dict], per_category: int) -> None:
    st.subheader("Quiz")
    answer = st.radio(prompt_kinds.quiz_question(summary), list(prompt_kinds.CHOICES),
                      format_func=prompt_kinds.CHOICES.get, index=None, key="_cp_quiz")
    if answer is None:
        return
    right, words = prompt_kinds.quiz_feedback(summary, answer, per_category)
    (st.success if right else st.error)(words)
    by = {s["category"]: s for s in summary}
    if "code" in by and "prose" in by:
        st.caption(
            f"code vs prose here: acceptance {by['code']['acceptance_rate']:.0%} vs "
            f"{by['prose']['acceptance_rate']:.0%}, speed-up {by['code']['speedup']:.2f}× vs "
            f"{by['prose']['speedup']:.2f}×."
        )


ui.init_state()
st.session_state.setdefault("_cp_results", {})  # run key -> (rows, finished)
st.session_state.setdefault("_cp_loaded", None)  # checked contents of an uploaded file
intro()
class_poll.ask(class_questions.CODE_VS_PROSE, missing="Run the prompt sets first: the room's guesses meet "
               "the measured acceptance.", reveal=lambda: class_questions.acceptance_truth(
                   class_poll.last_run(st.session_state["_cp_results"]) or []))
pair = ui.require_pair()
sets, settings = chosen_sets(pair)
ran = run_sets(pair, sets, settings)
loaded = reload_saved()
if loaded:
    rows = loaded["rows"]
    st.caption(f"Showing reloaded results: {drafter_words(str(loaded.get('drafter', '?')))} drafting for "
               f"{loaded.get('target', '?')}, settings {loaded.get('settings', '?')}")
    saved = loaded
elif ran:
    rows, finished = ran
    if not finished:
        st.warning("Stopped: the results below cover the prompts run so far.")
    saved = timing.saved_results(pair, settings, bool(st.session_state["chat"]), rows)
else:
    st.info("Press **Run the prompt sets**, or reload saved results.")
    st.stop()
summary = results(rows)
save_button(saved)
quiz(summary, max(sum(r["category"] == s["category"] for r in rows) for s in summary))
