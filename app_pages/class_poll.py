"""Class mode (not a page): the instructor asks the whole room, every student answers on their own
screen, and the projector shows the room's answers beside the measured truth (Peer Instruction).

A link's `class=CODE` puts a browser in a class as a student; `key=...` beside it (the instructor's
link from `python -m specdec class open`, or a class opened from the sidebar in presenter mode) makes
it the instructor's. The key moves from the address bar into the session on the first run, so it is
never on a projected address bar, and every action it allows is checked against the store again.

    frame()   app.py, every page: the link read, the sidebar's class panel, a student's question
    ask(...)  a page, where the lesson asks: the instructor's controls and the room's answers

Answers live in the class store (specdec.classroom.store), which every replica shares; the panels
poll it every POLL_SECONDS, so a tally is never older than that.
"""

from __future__ import annotations

import html
import io
import secrets
from collections.abc import Callable
from urllib.parse import urlsplit

import streamlit as st

from app_pages import ui
from specdec.classroom.invites import class_links, clean_code, spoken
from specdec.classroom.questions import MAX_NICKNAME_CHARS, Question, verdict
from specdec.classroom.store import BROWSER_PATTERN, CLOSED, OPEN, REVEALED, ClassStore
from specdec.errors import SpecDecError
from specdec.views import charts

POLL_SECONDS = 1.5
COOKIE = "specdec_browser"  # one id per browser, so a reload or a second tab is still one answer
COOKIE_DAYS = 30
CODE, KEY, BROWSER, NOTICE = "_class_code", "_class_key", "_class_browser", "_class_notice"


@st.cache_resource(show_spinner=False)
def _store() -> ClassStore:
    return ClassStore()


def store() -> ClassStore:
    """The process's one store (SpecDecError in one line if SPECDEC_CLASS_DB cannot be opened)."""
    return _store()


def frame() -> None:
    """app.py, before the URL is written: the class and key from the link (first run), the sidebar's
    class panel, and for a student the class's current question above the page."""
    _read_link()
    for notice in [st.session_state.pop(NOTICE, None)]:
        if notice:
            st.warning(f"Class link: {notice}", icon=":material/groups:")
    _sidebar_panel()
    if st.session_state.get(CODE) and not instructor():
        _cookie()
        _student_panel()


def link_params() -> dict[str, str]:
    """What the address bar keeps of the class: its code, never the key."""
    return {"class": st.session_state[CODE]} if st.session_state.get(CODE) else {}


def instructor() -> bool:
    return bool(st.session_state.get(CODE) and st.session_state.get(KEY))


def _read_link() -> None:
    if st.session_state.get("_class_read"):
        return
    st.session_state["_class_read"] = True
    cookie = st.context.cookies.get(COOKIE, "") if st.context.cookies else ""
    known = BROWSER_PATTERN.fullmatch(cookie or "")
    st.session_state[BROWSER] = cookie if known else secrets.token_urlsafe(16)
    st.session_state["_class_new_cookie"] = st.session_state[BROWSER] != cookie
    code, key = st.query_params.get("class"), st.query_params.get("key")
    if not code:
        return
    try:
        code = clean_code(code)
        store().class_closed(code)  # an unknown code is said here, once
    except SpecDecError as error:
        st.session_state[NOTICE] = str(error)
        return
    st.session_state[CODE] = code
    if key is not None:
        if store().is_instructor(code, key):
            st.session_state[KEY] = key
        else:
            st.session_state[NOTICE] = "this link's key is not this class's: you are here as a student"


def _cookie() -> None:
    """Keeps this browser's id in a cookie (read back by the next session of the same browser)."""
    if st.session_state.pop("_class_new_cookie", False):
        st.html(f"<script>document.cookie = '{COOKIE}={st.session_state[BROWSER]}; path=/; "
                f"max-age={COOKIE_DAYS * 86400}; SameSite=Lax';</script>", unsafe_allow_javascript=True)


def _base_url() -> str:
    url = urlsplit(st.context.url or "http://localhost:8501/")
    return f"{url.scheme}://{url.netloc}/"


@st.cache_data(show_spinner=False, max_entries=16)
def _qr_png(link: str) -> bytes:
    import qrcode

    out = io.BytesIO()
    qrcode.make(link, box_size=8, border=2).save(out)
    return out.getvalue()


def _sidebar_panel() -> None:
    """Presenter mode, or a class in hand: open a class; its code, link and QR code for the room."""
    if not (ui.presenter() or instructor()):
        return
    box = st.sidebar.expander("Class: the room answers", expanded=instructor())
    if not instructor():
        if box.button("Open a class", key="b_class_open", help="students answer the lesson's questions on "
                      "their own screens; the projector shows the room's answers"):
            try:
                invite = store().open_class()
            except SpecDecError as error:
                box.error(str(error))
                return
            st.session_state[CODE], st.session_state[KEY] = invite.code, invite.key
            st.rerun()
        return
    code = st.session_state[CODE]
    student, _ = class_links(_base_url(), code, st.session_state[KEY])
    box.markdown(f"### Class {spoken(code)}\nStudents open **{html.escape(student)}**")
    box.image(_qr_png(student), width=220)
    if box.button("End the class", key="b_class_end", help="no more answers; `python -m specdec class "
                  "export CODE --csv` writes them all"):
        store().close_class(code, st.session_state[KEY])
        st.session_state.pop(CODE), st.session_state.pop(KEY)
        st.rerun()


@st.fragment(run_every=POLL_SECONDS)
def _student_panel() -> None:
    code, browser = st.session_state[CODE], st.session_state[BROWSER]
    box = st.container(border=True, key="class_student")
    try:
        ended, asked = store().current(code)
    except SpecDecError as error:
        box.error(str(error), icon=":material/error:")
        return
    box.markdown(f"**Class {spoken(code)}**" + (": this class has ended" if ended else ""))
    if ended:
        return
    if asked is None:
        box.markdown("No question yet: when your instructor asks one, it appears here.")
        return
    question, mine = asked.question, store().answer_of(code, asked.question.id, browser)
    box.markdown(f"**{html.escape(question.text)}**")
    if asked.state == OPEN:
        _answer_form(box, code, question, browser, mine)
        return
    if mine is not None:
        box.markdown(f"Your answer: {html.escape(_words(question, mine))}")
    if asked.state == CLOSED:
        box.markdown("Answers are closed. The instructor will reveal the measured answer.")
    elif asked.state == REVEALED:
        _room_chart(box, code, question, asked.truth)


def _answer_form(box, code: str, question: Question, browser: str, mine) -> None:
    with box.form(f"class_form_{question.id}", border=False):
        if question.is_choice:
            values = [st.radio("Your answer", range(len(question.options)),
                               index=int(mine[0]) if mine else None, key=f"class_{question.id}_choice",
                               format_func=lambda i: f"{chr(65 + i)}. {question.options[i]}")]
        else:
            cols, unit = st.columns(len(question.parts)), f" ({question.unit})" if question.unit else ""
            values = [col.slider(f"{part or 'Your answer'}{unit}",
                                 question.low, question.high,
                                 mine[i] if mine else (question.low + question.high) / 2, question.step,
                                 key=f"class_{question.id}_{i}")
                      for i, (col, part) in enumerate(zip(cols, question.parts, strict=True))]
        nickname = st.text_input("Nickname (optional)", max_chars=MAX_NICKNAME_CHARS, key="class_nickname")
        sent = st.form_submit_button("Change my answer" if mine else "Send my answer", type="primary")
    if sent:
        if any(v is None for v in values):
            box.warning("Choose an answer first.")
            return
        try:
            store().answer(code, question.id, browser, tuple(float(v) for v in values), nickname)
        except SpecDecError as error:
            box.error(str(error), icon=":material/error:")
            return
        box.success("Your answer is in: you can change it until the question closes.")
    elif mine is not None:
        box.markdown(f"Your answer is in ({html.escape(_words(question, mine))}): change it until the "
                     "question closes.")


def _words(question: Question, values) -> str:
    if question.is_choice:
        return f"{chr(65 + int(values[0]))}. {question.options[int(values[0])]}"
    pairs = zip(question.parts, values, strict=True)
    return ", ".join(f"{part + ' ' if part else ''}{v:g}{question.unit}" for part, v in pairs)


def _room_chart(box, code: str, question: Question, truth) -> None:
    result = store().tally(code, question.id)
    if result is None:
        return
    ui.chart(charts.class_answers_chart(result, truth), container=box)
    if truth is not None:
        for line in verdict(result, truth):
            box.markdown(f"**{html.escape(line)}**")


def ask(question: Question, reveal: Callable[[], tuple | None] | None = None, missing: str = "") -> None:
    """Where a page asks the room `question`: for the instructor, the controls and the room's answers
    (nothing for anyone else: a student sees the question above every page). `reveal` gives the
    measured answer (None if the page has not measured it yet: `missing` says what to run first); a
    question whose right options are known beforehand needs none."""
    if instructor():
        _instructor_panel(question, reveal, missing)


@st.fragment(run_every=POLL_SECONDS)
def _instructor_panel(question: Question, reveal, missing: str) -> None:
    code = st.session_state[CODE]
    box = st.container(border=True, key=f"class_instructor_{question.id}")
    box.markdown(f"**Ask the room (class {spoken(code)}):** {html.escape(question.text)}")
    try:
        asked = store().asked(code, question.id)  # after any button's action (its callback ran first)
    except SpecDecError as error:
        box.error(str(error), icon=":material/error:")
        return
    state = asked.state if asked else None
    cols = box.columns([1, 1, 1, 1, 2])
    buttons = [("open", "Re-open" if state in (CLOSED, REVEALED) else "Open", state == OPEN),
               ("close", "Close", state != OPEN), ("reveal", "Reveal", state not in (OPEN, CLOSED)),
               ("reset", "Reset", state is None)]
    for col, (action, label, disabled) in zip(cols, buttons, strict=False):
        col.button(label, disabled=disabled, key=f"b_class_{question.id}_{action}", on_click=_act,
                   args=(action, question, reveal, missing),
                   type="primary" if action == "reveal" else "secondary")
    said = st.session_state.pop(f"_class_said_{question.id}", None)
    if said:
        (box.warning if said[0] == "warning" else box.error)(said[1], icon=":material/info:")
    result = store().tally(code, question.id) if asked else None
    cols[4].metric("Answers in", result.count if result else 0)
    if asked is None:
        box.markdown("Press **Open**: students see the question on their screens.")
    elif asked.state == OPEN:
        box.markdown("Open: students are answering. **Close** to show the spread, **Reveal** to measure.")
    else:
        _room_chart(box, code, question, asked.truth)


def _act(action: str, question: Question, reveal, missing: str) -> None:
    """A button's action, before the panel is drawn again (so it draws the new state at once)."""
    code, key = st.session_state[CODE], st.session_state[KEY]
    try:
        if action == "open":
            store().open_question(code, key, question)
        elif action == "close":
            store().close_question(code, key, question.id)
        elif action == "reveal":
            truth = reveal() if reveal else None
            truth = truth if truth is not None else (question.correct or None)
            if truth is None:
                said = missing or "Nothing measured yet to reveal."
                st.session_state[f"_class_said_{question.id}"] = ("warning", said)
            else:
                store().reveal(code, key, question.id, tuple(truth))
        elif action == "reset":
            store().reset(code, key, question.id)
    except SpecDecError as error:
        st.session_state[f"_class_said_{question.id}"] = ("error", str(error))


def last_run(results: dict):
    """A page's latest finished or stopped run, from its {run key: (rows or trial, finished)} store."""
    return list(results.values())[-1][0] if results else None
