"""The rule on trial, several candidates at one position: the four multi-candidate rules (a token tree's
siblings) with their exact laws beside samples, and their acceptance against one draft's.
Widgets -> specdec.measure.tree_trial -> charts."""

from __future__ import annotations

import streamlit as st

from app_pages import ui
from specdec.errors import SpecDecError
from specdec.measure import exact, tree_trial
from specdec.views import charts, numbers

DEFAULT_SAMPLES = 1000


def tree_rules_section(pair, context: list[int], settings, samples: int) -> None:
    """Section 3 of the rule on trial, at the trial's position and settings (`samples`: the trial's,
    for its default here)."""
    st.header("3 · Several candidates at one position")
    st.markdown(
        "A token tree offers several drafts for the same position, all children of one node, and at most "
        "one survives. The exact rule draws the candidates from q **without replacement** and judges them "
        "in turn. Keep x with probability **min(1, pᵢ(x)/qᵢ(x))**. After a rejection the target's p "
        "becomes the residual **norm(max(0, pᵢ − qᵢ))**, and q loses x (renormalised). If every candidate "
        "is rejected, the token is drawn from the last residual. Beside it, the same idea with "
        "replacement (SpecInfer's rule), and two rules that look right and are not."
    )
    with ui.inputs_box("Candidates per position and samples"):
        cols = st.columns(2)
        width = int(cols[0].selectbox("Candidates per position", tree_trial.WIDTHS, index=1, key="_rt_width"))
        count = int(cols[1].number_input("Samples of each rule", 100, 5000, max(DEFAULT_SAMPLES, samples),
                                         step=100, key="_rt_tree_samples"))
    key = (pair.target.name, pair.drafter_name, tuple(context), settings, width, count)
    results = st.session_state.setdefault("_rt_trees", {})
    if st.button("Put the tree rules on trial", key="b_rt_trees", type="primary"):
        with st.spinner(f"{count} samples of each of {len(tree_trial.TREE_RULES)} rules…"):
            try:
                results[key] = tree_trial.trial_at(pair, context, settings, width, count)
            except SpecDecError as error:
                st.error(str(error), icon=":material/error:")
                return
    if key not in results:
        st.info("Press **Put the tree rules on trial**: the same position and settings as section 1, each "
                f"rule with {width} candidates, exactly and in {count} samples.")
        return
    _show(results[key], width)


def _show(found: dict, width: int) -> None:
    if found["greedy"]:
        st.info("At temperature 0 every rule keeps the candidate that is the target's top token, if one "
                "is, and otherwise emits that token: all four give the target's greedy token.")
        return
    if not found["drafts"]:
        st.info("The drafter proposes nothing at this position, so there are no candidates to judge.")
        return
    rows, single = found["rows"], found["single"]
    band = rows[0]["tv_noise_band"]
    st.table([{
        "rule": row["title"] + ("" if row["lossless"] else " ⚠ lossy"),
        "candidates": row["draws"],
        "each tested by": row["test"],
        "one kept": f"{row['acceptance']:.3f}",
        "exactly": f"{row['acceptance_exact']:.3f}",
        "TV from target": f"{row['tv']:.3f}",
        "TV exact": f"{row['tv_exact']:.3f}",
        "in noise band": "yes" if row["tv"] <= band else "no",
        "χ² p-value": numbers.p_value(row["chi2_p"]),
    } for row in rows])
    left, right = st.columns(2) if ui.presenter() else (st.container(), st.container())
    ui.chart(charts.tree_acceptance_chart(rows, single, f"How often one of {width} candidates is kept"),
             container=left)
    titles = [(row["rule"], row["title"]) for row in rows]
    ui.chart(charts.exact_law_chart(found["laws"], titles, "What each rule emits here, exactly, against p"),
             container=right)
    rest = " Tokens outside the ten likeliest count as one, *(the rest)*." if found["rest"] else ""
    ui.note(f"One draft here keeps {single:.3f} (Σ min(p, q)). Exact figures by enumerating every draw of "
            f"the candidates and every outcome of their tests.{rest} Noise band of the target's two halves: "
            f"TV 0 to {band:.3f}.")
    lossy_caught = [row["title"] for row in rows if exact.caught(row) and not row["lossless"]]
    chance = [row["title"] for row in rows if exact.caught(row) and row["lossless"]]
    hidden = [row for row in rows if not exact.caught(row) and not row["lossless"]]
    if lossy_caught:
        st.error(f"Caught in the act (χ² p < {exact.CAUGHT_P:g}, TV outside the noise band): "
                 f"{', '.join(lossy_caught)}.", icon=":material/gavel:")
    if hidden:
        st.warning("Not caught by these samples: " + ", ".join(
            f"{row['title']} (exact TV {numbers.figure(row['tv_exact'], 2)})" for row in hidden)
            + ". More samples, or a position where p and q disagree more, show it.",
            icon=":material/visibility_off:")
    if chance:
        st.info(f"{', '.join(chance)} fell outside the noise band with χ² p < {exact.CAUGHT_P:g}: a lossless "
                "rule does that about 1 time in 1,000 by chance alone.")
