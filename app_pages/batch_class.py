"""A class is a batch: the same rows decoded 1, 2, 4, 8, 16 at a time, with and without speculation."""

from dataclasses import replace

import streamlit as st

from app_pages import ui
from specdec.errors import SpecDecError
from specdec.measure import batching
from specdec.measure.timing import device_name
from specdec.models.batch_runs import check_batchable
from specdec.models.pair import ModelPair
from specdec.views import charts

PROMPT_SET = "code"  # the held-out code set bench decodes: where speculation pays most for one row


def intro() -> None:
    st.title("A class is a batch")
    st.markdown(
        "Speculation spends arithmetic that a one-row pass leaves idle: the target reads all its weights "
        "from memory for one token, so checking γ + 1 tokens costs little more. **A batch spends the same "
        "idle arithmetic**: a server decoding many requests at once already feeds the target one token "
        "per request per pass. Add k drafts per request and every pass reads B × (k + 1) tokens. Once that "
        "keeps the arithmetic busy, verification is no longer free: speculation can make the server "
        "slower."
    )
    st.markdown(
        "**Thirty students on this server are a batch.** This page decodes the same prompts with the "
        "current pair and sidebar settings, B rows at a time, target-only and speculatively, and times "
        "both here, live."
    )


def controls() -> tuple[int, int]:
    with ui.inputs_box("Full run's size"):
        left, right = st.columns(2)
        tokens = left.slider("New tokens per row (full run)", 8, 64, 32, step=8, key="_bc_tokens")
        prompts = right.slider(f"Prompts from the {PROMPT_SET} set, repeated to fill a batch (full run)",
                               1, 6, 4, key="_bc_prompts")
    return int(tokens), int(prompts)


def plan(kind: str, tokens: int, count: int) -> dict:
    """What a run decodes: the quick default, or the full run at the sliders' sizes."""
    if kind == "quick":
        quick = batching.QUICK_RUN
        return quick | {"tokens": min(quick["tokens"], tokens), "prompts": min(quick["prompts"], count)}
    return {"tokens": tokens, "prompts": count, "sizes": batching.BATCH_SIZES, "cost": True}


def plan_words(run: dict) -> str:
    sizes = ", ".join(map(str, run["sizes"]))
    return (f"{run['prompts']} prompt(s), {run['tokens']} new tokens a row, B = {sizes}"
            + (". Then it times one target pass for each B" if run["cost"] else ""))


def measure(pair: ModelPair, results: dict) -> dict | None:
    tokens, count = controls()
    try:
        check_batchable(pair)
        base = ui.current_settings()
        prompts = [pair.encode_prompt(p, bool(st.session_state["chat"]), tokens)
                   for p in batching.held_out_prompts(PROMPT_SET)[:count]]
    except SpecDecError as error:
        st.error(str(error), icon=":material/error:")
        st.stop()
    key = (pair.target.name, pair.drafter_name, base, tokens, tuple(map(tuple, prompts)))
    pace = f"batch:{pair.target.name}:{pair.drafter_name}:{base.gamma}"  # seconds per one-token pass
    runs = {kind: plan(kind, tokens, count) for kind in ("quick", "full")}
    weights = {kind: batching.class_weights(replace(base, max_new_tokens=run["tokens"]), run["prompts"],
                                            run["sizes"], run["cost"])
               for kind, run in runs.items()}
    chosen = ui.quick_full_buttons(("Decode the class", "b_bc_run"), ("Full run", "b_bc_full"),
                                   "b_bc_stop", "_bc_stop")
    note = st.empty()  # the estimates: written after a run, at the pace it measured
    if chosen:
        run = runs[chosen]
        settings = replace(base, max_new_tokens=run["tokens"])

        def save(items: list, finished: bool) -> None:
            results[key] = {"points": [v for kind, v in items if kind == "batch"],
                            "curve": [v for kind, v in items if kind == "cost"], "run": chosen,
                            "plan": run, "finished": finished, "device": device_name(pair)}

        ui.run_with_progress(batching.class_run(pair, prompts[: run["prompts"]], settings, run["sizes"],
                                                run["cost"]),
                             batching.class_steps(settings, run["sizes"], run["cost"]), describe, "_bc_stop",
                             save, weights[chosen], draw=lambda items: live(items, len(items)),
                             pace_key=pace)
    ui.note(f"**Decode the class** is the quick run: {plan_words(runs['quick'])} "
            f"({ui.estimate_text(pace, sum(weights['quick']))}).\n\nThe full run: "
            f"{plan_words(runs['full'])} ({ui.estimate_text(pace, sum(weights['full']))}).",
            container=note)
    return results.get(key)


def live(items: list, tag: int) -> None:
    """What a run draws as its results arrive: the throughput so far, then the cost curve so far."""
    points = [v for kind, v in items if kind == "batch"]
    rows = batching.class_rows(points, [])
    ui.chart(charts.batch_throughput_chart(rows, batching.crossover(points)), key=f"_bc_live{tag}")
    if curve := [v for kind, v in items if kind == "cost"]:
        ui.chart(charts.batch_cost_chart(curve), key=f"_bc_live_cost{tag}")


def describe(item) -> str:
    kind, value = item
    if kind == "batch":
        return (f"B={value.batch_size}: {value.target_only_tokens_per_second:.0f} tokens/s target only, "
                f"{value.speculative_tokens_per_second:.0f} speculative ({value.ratio:.2f}x)")
    return (f"cost curve: {value['rows']} rows × {value['tokens_per_row']} tokens: "
            f"{value['seconds'] * 1000:.0f} ms")


def show(result: dict) -> None:
    points, curve = result["points"], result["curve"]
    if not result["finished"]:
        st.warning("Stopped: the figures below are partial.")
    st.caption(f"{'Quick' if result['run'] == 'quick' else 'Full'} run: {plan_words(result['plan'])}.")
    if not points:
        return
    rows = batching.class_rows(points, curve)
    crossover = batching.crossover(points)
    # One chart per row: side by side, the cost chart's two panels had their axis titles cut.
    ui.chart(charts.batch_throughput_chart(rows, crossover), key="_bc_throughput")
    if curve:
        ui.chart(charts.batch_cost_chart(curve), key="_bc_cost")
    elif result["plan"]["cost"]:
        st.info("The cost curve is measured after the batches.")
    st.table([{  # a table, not a data frame: headers wrap instead of being cut off
        "B": r["batch_size"],
        "target only tok/s": round(r["target_only_tokens_per_second"], 1),
        "speculative tok/s": round(r["speculative_tokens_per_second"], 1),
        "ratio": round(r["ratio"], 2),
        "expected ratio": None if r["expected_ratio"] is None else round(r["expected_ratio"], 2),
        "per row tok/s (target only)": round(r["per_row_target_only_tokens_per_second"], 1),
        "per row tok/s (speculative)": round(r["per_row_tokens_per_second"], 1),
        "target pass ms per row": round(r["pass_seconds_per_row"] * 1000, 1),
        "rows per round": round(r["verify_pass_rows"], 1),
        "alpha": round(r["alpha"], 2),
        "tokens per pass": round(r["tokens_per_pass"], 2),
    } for r in rows], hide_index=True)
    if curve and all(r["expected_ratio"] is not None for r in rows):
        ui.chart(charts.batch_ratio_chart(rows), key="_bc_ratio")
    explain(rows, curve, crossover, result["device"], result["finished"], result["run"] == "quick")


def explain(rows: list[dict], curve: list[dict], crossover: int | None, device: str, finished: bool,
            quick: bool = False) -> None:
    first, last = rows[0], rows[-1]
    text = (f"On **{device}**, at B = {first['batch_size']} speculation runs at **{first['ratio']:.2f}×** "
            "the target alone" + (f"; at B = {last['batch_size']}, **{last['ratio']:.2f}×**. "
                                  if len(rows) > 1 else ". "))
    if crossover is not None:
        measured = ", ".join(str(r["batch_size"]) for r in rows)
        text += (f"It first falls below 1 at **B = {crossover}**" + (f" of the sizes measured ({measured})"
                 if quick else "") + ": from there on, speculating makes this server slower. ")
    elif quick and finished:
        text += (f"It has not fallen below 1 up to B = {last['batch_size']} in this quick run: the quick run "
                 "cannot show where speculation stops paying here; the **full run** goes on to "
                 f"B = {batching.BATCH_SIZES[-1]}. ")
    elif not finished:
        text += ("It has not fallen below 1 in the batch sizes measured before the stop "
                 f"(up to B = {last['batch_size']}). ")
    else:
        text += (f"It never fell below 1 up to B = {last['batch_size']}: the passes here are still far from "
                 "compute-bound, so the extra tokens of verification stay cheap (see the cost curve). ")
    if curve:
        ones = sorted((r for r in curve if r["tokens_per_row"] == 1), key=lambda r: r["rows"])
        if len(ones) > 1:
            per_token = [r["seconds"] / r["tokens"] * 1000 for r in ones]
            text += (f"A plain pass costs {per_token[0]:.1f} ms per row at B = {ones[0]['rows']} and "
                     f"{per_token[-1]:.1f} ms per row at B = {ones[-1]['rows']}: while rows are few the pass "
                     "is **memory-bound** (rows ride along almost free), and once they are many it is "
                     "**compute-bound** (each token costs its own arithmetic). The expected ratio reads "
                     "that curve: tokens per round × cost(B rows × 1 token) / (drafting + cost(B rows × "
                     "(k̄ + 1) tokens)), with B the rows a pass really served (speculative rows finish "
                     "after different numbers of rounds, so the last rounds serve fewer rows).")
    st.markdown(text)
    st.markdown(
        "**In practice.** Hosted APIs speculate when load is low and a few users each want their answer "
        "fast. Serving engines such as vLLM and SGLang cut the draft length or switch speculation off as "
        "the batch grows, because at high load the verification tokens compete with other users' tokens "
        "for the same arithmetic. A classroom on one server is exactly that load: thirty students are a "
        "batch of thirty."
    )


ui.init_state()
st.session_state.setdefault("_bc_results", {})
intro()
pair = ui.require_pair()
measured = measure(pair, st.session_state["_bc_results"])
if measured is None:
    st.info("Press **Decode the class**: the same rows B at a time, target-only and speculative, for each B.")
else:
    show(measured)
