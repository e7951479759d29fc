"""Round by round's playback: which stage is shown, what a click or a timer beat does next.

No Streamlit here. The state is any mutable mapping (the page passes its session state, a test a
dict), so its settings survive as plain keys:

    stage            the stage shown, 1 (draft) to 5 (the round's output)
    revealed         stage 1 reveals the drafts one by one while animating: how many are shown
    playing          Play: rounds follow one another on the timer
    animating        the timer walks through the shown round's stages
    speed            seconds per beat, by name (SPEEDS)
    animate_stages   a new round starts at stage 1 and plays its stages (else it shows stage 5)
    stage_per_click  the instructor's pace: Step (→ on a clicker) shows the next stage, Back the one before

What a step needs from the run is passed in: whether a round is shown, how many drafts it has.
"""

from __future__ import annotations

from collections.abc import MutableMapping

ALL = 10**6  # `revealed` when every draft of stage 1 is shown
LAST_STAGE = 5
# Seconds per beat (a stage, or one more draft revealed in stage 1). At "normal" a round with four
# drafts reaches stage 5 in 7 beats (3 reveals and 4 stages); "slow" and "relaxed" leave time to talk.
SPEEDS = {"slow": 2.0, "relaxed": 1.0, "normal": 0.25}
NEXT_ROUND = "next round"  # what a beat asks of the run when the shown round has played out


def start(state: MutableMapping, presenter: bool) -> None:
    """The defaults, set once; an existing value (a setting the user chose) is kept."""
    for key, value in {
        "stage": LAST_STAGE, "playing": False, "animating": False, "speed": "normal",
        "animate_stages": True, "stage_per_click": presenter, "revealed": ALL,
    }.items():
        state.setdefault(key, value)


def stage(state: MutableMapping) -> int:
    return state["stage"] or LAST_STAGE  # a stage picker cleared by a second click reads None


def show(state: MutableMapping, stage_number: int, animating: bool = False, revealed: int = ALL) -> None:
    state["stage"], state["animating"], state["revealed"] = stage_number, animating, revealed


def next_stage_only(state: MutableMapping, round_shown: bool) -> bool:
    """One stage per click, and the shown round has stages left to show."""
    return bool(state["stage_per_click"]) and round_shown and stage(state) < LAST_STAGE


def step(state: MutableMapping, round_shown: bool) -> bool:
    """The Step button. True when the run must compute the next round; else the next stage is shown."""
    if next_stage_only(state, round_shown):
        show(state, stage(state) + 1)
        return False
    return True


def new_round(state: MutableMapping, question_stage: int | None = None) -> None:
    """A round was just computed: where it starts. `question_stage`: a student is asked about it, at
    that stage, before anything further is shown."""
    if question_stage is not None:
        show(state, question_stage)
    elif state["stage_per_click"]:  # the instructor clicks through its stages
        show(state, 1)
    elif state["animate_stages"]:
        show(state, 1, animating=True, revealed=1)
    else:
        show(state, LAST_STAGE)


def played_round(state: MutableMapping) -> None:
    """Play computed the next round on a beat: it starts at stage 1 when stages are animated."""
    animate = state["animate_stages"]
    state["stage"], state["revealed"] = (1, 1) if animate else (LAST_STAGE, ALL)


def back(state: MutableMapping, round_shown: bool) -> bool:
    """The Back button. True when the run must go back a round (then shown at its last stage); with one
    stage per click it goes back a stage first."""
    if state["stage_per_click"] and round_shown and stage(state) > 1:
        show(state, stage(state) - 1)
        return False
    show(state, LAST_STAGE)
    return True


def reset(state: MutableMapping) -> None:
    show(state, LAST_STAGE)
    state["playing"] = False


def toggle_play(state: MutableMapping) -> None:
    state["playing"], state["animating"] = not state["playing"], False


def tick(state: MutableMapping, drafts_shown_round: int | None, waits_for_answer: bool) -> str | None:
    """One timer beat: the next draft of stage 1, the next stage, or NEXT_ROUND (the run computes it
    and calls `new_round`). `drafts_shown_round`: the shown round's number of drafts, None before any."""
    if state["animate_stages"] and drafts_shown_round is not None and state["stage"] == 1:
        if state["revealed"] < drafts_shown_round:
            state["revealed"] += 1
            return None
    if state["animate_stages"] and drafts_shown_round is not None and state["stage"] < LAST_STAGE:
        show(state, state["stage"] + 1, animating=state["animating"])
        return None
    if not state["playing"] or waits_for_answer:  # student mode: each round waits for an answer
        state["animating"] = False
        return None
    return NEXT_ROUND


def timer_interval(state: MutableMapping) -> float | None:
    """Seconds between beats while playing or animating a round; None when nothing moves."""
    return SPEEDS[state["speed"]] if state["playing"] or state["animating"] else None
