"""Live speed-up's tree against chain (a section, not a page): the same prompt decoded with a tree of
drafts per round, with the same draft model's chain, and by the target alone, racing.
Widgets -> specdec.measure.tree_race / timing -> charts."""

from __future__ import annotations

import streamlit as st

from app_pages import ui
from specdec.measure import timing, tree_race
from specdec.views import charts

REDRAW_EVERY = 6  # passes between chart redraws while racing


def _chart(slot, runs: dict, tag: str) -> None:
    with slot.container():
        ui.chart(charts.race_chart({label: timing.race_points(run) for label, run in runs.items()}),
                 key=f"_sp_tree_race{tag}")


def tree_section(pair, prompt_ids: list[int], settings) -> None:
    st.subheader("A tree of drafts against the chain")
    tree = tree_race.tree_settings(settings).tree
    st.markdown(
        "A **tree** offers several guesses per position, all checked in the same target pass. Each "
        "branch sees only its own ancestors. At most one guess per position is kept, exactly as the "
        f"chain's rule would keep it. It costs a wider pass. The race: the tree ({tree}), the chain, and "
        "the target alone, on this prompt and these settings."
    )
    key = (pair.target.name, pair.drafter_name, tuple(prompt_ids), settings)
    results = st.session_state.setdefault("_sp_tree", {})
    slot = st.empty()
    if ui.run_stop_buttons("Race tree against chain", "b_tree_race", "b_tree_stop", "_sp_tree_stop"):
        runs = {}
        for passes, runs in enumerate(timing.race_lanes(tree_race.tree_lanes(pair, settings), prompt_ids),
                                      start=1):
            results[key] = (runs, False)
            if passes % REDRAW_EVERY == 0:
                _chart(slot, runs, str(passes))
            if st.session_state.get("_sp_tree_stop"):
                break
        if runs:
            results[key] = (runs, all(run.finished for run in runs.values()))
    if key not in results:
        st.info("Press **Race tree against chain** to decode the prompt three ways, live.")
        return
    runs, finished = results[key]
    if not finished:
        st.warning("Stopped: the numbers below cover the tokens produced so far.")
    _chart(slot, runs, "final")
    rows = tree_race.lane_rows(runs)
    st.table([{"lane": row["lane"], "tokens": row["tokens"], "tokens/s": f"{row['tokens_per_second']:.1f}",
               "speed-up": f"{row['speedup']:.2f}×", "target passes": row["passes"],
               "tokens per pass": f"{row['tokens_per_pass']:.2f}"} for row in rows])
    tree_row = rows[0]
    if not tree_row["trees"]:
        st.info("This drafter drafted no tree: trees are drafted by a draft model (the n-gram lookup and "
                "the feature head draft chains), so the tree lane raced a chain.")
        return
    chain = next(row for row in rows if row["lane"] == tree_race.CHAIN)
    ratio = tree_row["tokens_per_second"] / chain["tokens_per_second"] if chain["tokens_per_second"] else 0
    st.markdown(f"**The tree gave {tree_row['tokens_per_pass']:.2f} tokens per target pass against the "
                f"chain's {chain['tokens_per_pass']:.2f}**, and ran at {ratio:.2f}× the chain's speed on "
                "this machine (one run each: a few percent is noise).")
