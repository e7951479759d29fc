"""Round by round's playback as plain state: a click or a beat moves it as the lesson needs, without
Streamlit."""

import pytest

from specdec.views import playback
from specdec.views.playback import ALL, LAST_STAGE, NEXT_ROUND


def fresh(**settings) -> dict:
    state = dict(settings)
    playback.start(state, presenter=False)
    return state


def test_start_keeps_what_the_user_chose_and_sets_the_rest():
    state = {"speed": "slow"}
    playback.start(state, presenter=True)
    assert state["speed"] == "slow" and state["stage_per_click"] is True and state["stage"] == LAST_STAGE
    playback.start(state, presenter=False)  # a rerun: nothing moves
    assert state["stage_per_click"] is True


def test_one_stage_per_click_walks_the_round_then_asks_for_the_next():
    state = fresh(stage_per_click=True)
    assert playback.step(state, round_shown=False)  # nothing shown yet: compute a round
    playback.new_round(state)
    assert state["stage"] == 1 and not state["animating"]
    for expected in (2, 3, 4, 5):
        assert not playback.step(state, round_shown=True)
        assert state["stage"] == expected
    assert playback.step(state, round_shown=True)  # stage 5 shown: the next click computes a round


def test_back_goes_a_stage_back_then_a_round_back_at_its_end():
    state = fresh(stage_per_click=True)
    playback.new_round(state)
    playback.step(state, round_shown=True)
    assert not playback.back(state, round_shown=True) and state["stage"] == 1
    assert playback.back(state, round_shown=True) and state["stage"] == LAST_STAGE


@pytest.mark.parametrize(("animate", "stage", "animating", "revealed"),
                         [(True, 1, True, 1), (False, 5, False, ALL)])
def test_a_new_round_animates_only_when_asked(animate, stage, animating, revealed):
    state = fresh(stage_per_click=False, animate_stages=animate)
    playback.new_round(state)
    assert (state["stage"], state["animating"], state["revealed"]) == (stage, animating, revealed)


def test_a_student_question_holds_the_round_at_its_stage():
    state = fresh(stage_per_click=True)
    playback.new_round(state, question_stage=2)
    assert state["stage"] == 2 and not state["animating"]


def test_beats_reveal_drafts_then_stages_then_ask_for_a_round_only_while_playing():
    state = fresh(stage_per_click=False)
    playback.new_round(state)
    beats = 0
    while state["animating"] and beats < 20:
        assert playback.tick(state, drafts_shown_round=3, waits_for_answer=False) is None
        beats += 1
    # two more drafts revealed, four stages, and a beat at stage 5 that stops the timer
    assert state["stage"] == LAST_STAGE and beats == 2 + 4 + 1
    assert playback.timer_interval(state) is None  # not playing: the timer stops
    playback.toggle_play(state)
    assert playback.tick(state, drafts_shown_round=3, waits_for_answer=False) == NEXT_ROUND
    # A student answers first: the beat asks for no round.
    assert playback.tick(state, drafts_shown_round=3, waits_for_answer=True) is None
    assert playback.timer_interval(state) == playback.SPEEDS["normal"]  # playing: the beats go on


def test_the_timer_runs_at_the_chosen_speed_while_anything_moves():
    state = fresh(speed="slow")
    assert playback.timer_interval(state) is None
    playback.toggle_play(state)
    assert playback.timer_interval(state) == playback.SPEEDS["slow"]
    playback.reset(state)
    assert playback.timer_interval(state) is None and state["stage"] == LAST_STAGE
