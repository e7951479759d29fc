"""The class store: who may do what, what an answer may be, and that nothing is lost or counted twice."""

import sqlite3

import pytest

from specdec.classroom.invites import CODE_ALPHABET, class_links, clean_code, key_matches, spoken
from specdec.classroom.questions import Question, clean_nickname, parse_values, verdict
from specdec.classroom.store import ClassStore
from specdec.errors import SpecDecError

CHOICE = Question("check", "Why is code faster?", options=("a", "b", "c", "d"), correct=(1,))
SLIDERS = Question("code-vs-prose", "Acceptance?", low=0, high=100, step=1, parts=("code", "prose"), unit="%")
BROWSERS = [f"browser-{i:04d}" for i in range(10)]


@pytest.fixture
def store(tmp_path):
    return ClassStore(f"sqlite:///{tmp_path / 'class.sqlite'}")


@pytest.fixture
def room(store):
    invite = store.open_class()
    store.open_question(invite.code, invite.key, CHOICE)
    store.open_question(invite.code, invite.key, SLIDERS)
    return store, invite


def test_codes_are_short_readable_and_typed_loosely(store):
    codes = {store.open_class().code for _ in range(20)}
    assert len(codes) == 20
    for code in codes:
        assert len(code) == 6 and set(code) <= set(CODE_ALPHABET)
        assert not set(code) & set("0O1IL5S2Z8B")  # nothing that sounds or looks like another
        assert clean_code(spoken(code).lower()) == code
        assert clean_code(f"{code[:3]}-{code[3:]}") == code


@pytest.mark.parametrize("text", ["", "   ", "ABC", "ABCDEFG", "AB<script>", "ÄÄÄÄÄÄ", "A" * 5000, None])
def test_a_bad_code_is_one_line(text):
    with pytest.raises(SpecDecError) as caught:
        clean_code(text)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 200


def test_unknown_class_is_refused(store):
    with pytest.raises(SpecDecError, match="no class"):
        store.answer("ACDEFG", "check", BROWSERS[0], (1.0,))


def test_one_answer_per_browser_changeable_until_close(room):
    store, invite = room
    store.answer(invite.code, "check", BROWSERS[0], (0.0,))
    store.answer(invite.code, "check", BROWSERS[0], (0.0,))  # replayed
    store.answer(invite.code, "check", BROWSERS[0], (2.0,))  # changed
    store.answer(invite.code, "check", BROWSERS[1], (2.0,))
    result = store.tally(invite.code, "check")
    assert result.count == 2 and result.per_option == (0, 0, 2, 0)
    store.close_question(invite.code, invite.key, "check")
    with pytest.raises(SpecDecError, match="closed"):
        store.answer(invite.code, "check", BROWSERS[0], (1.0,))
    assert store.tally(invite.code, "check").per_option == (0, 0, 2, 0)


def test_sliders_take_one_value_each_in_range(room):
    store, invite = room
    store.answer(invite.code, "code-vs-prose", BROWSERS[0], (80.0, 40.0))
    store.answer(invite.code, "code-vs-prose", BROWSERS[1], (60.0, 50.0))
    store.answer(invite.code, "code-vs-prose", BROWSERS[2], (70.0, 30.0))
    result = store.tally(invite.code, "code-vs-prose")
    assert result.count == 3 and result.medians() == (70.0, 40.0)
    lines = verdict(result, (75.0, 40.0))
    assert "median guess 70%: 5 points too low" in lines[0] and "exactly right" in lines[1]


@pytest.mark.parametrize("question, values", [
    ("check", (4.0,)), ("check", (-1.0,)), ("check", (1.5,)), ("check", (float("nan"),)),
    ("check", (1.0, 2.0)),
    ("code-vs-prose", (101.0, 40.0)), ("code-vs-prose", (50.0,)), ("code-vs-prose", (float("inf"), 1.0)),
    ("check", ("1",)), ("check", (True,)),
])
def test_out_of_range_or_malformed_values_are_refused_and_never_stored(room, question, values):
    store, invite = room
    with pytest.raises(SpecDecError) as caught:
        store.answer(invite.code, question, BROWSERS[0], values)
    assert "\n" not in str(caught.value)
    assert store.tally(invite.code, question).count == 0


@pytest.mark.parametrize("browser", ["", "short", "x" * 65, "a b c d e f g h", "<img src=x onerror=alert(1)>",
                                     "'; DROP TABLE specdec_answers; --", None, 12345678])
def test_hostile_browser_ids_are_refused(room, browser):
    store, invite = room
    with pytest.raises(SpecDecError):
        store.answer(invite.code, "check", browser, (1.0,))
    assert store.tally(invite.code, "check").count == 0


@pytest.mark.parametrize("question_id", ["nope", "../check", "CHECK", "x" * 41, "", None])
def test_unknown_or_hostile_question_ids_are_refused(room, question_id):
    store, invite = room
    with pytest.raises(SpecDecError):
        store.answer(invite.code, question_id, BROWSERS[0], (1.0,))


def test_nicknames_are_optional_trimmed_and_bounded(room):
    store, invite = room
    assert clean_nickname("  Ada \u202e\x00 L. ") == "Ada L."
    assert clean_nickname(None) == ""
    with pytest.raises(SpecDecError, match="at most 24"):
        store.answer(invite.code, "check", BROWSERS[0], (1.0,), "x" * 10_000)
    store.answer(invite.code, "check", BROWSERS[0], (1.0,), "<b>Ada</b>")
    assert store.export(invite.code)[0]["nickname"] == "<b>Ada</b>"  # kept as text; escaped where shown


def test_parse_values_reads_what_a_form_or_link_sends():
    assert parse_values("3") == (3.0,) and parse_values("0.7,0.4") == (0.7, 0.4) and parse_values(2) == (2.0,)
    for bad in ("x", "1," * 100, "", [None], [True]):
        with pytest.raises(SpecDecError):
            parse_values(bad)


@pytest.mark.parametrize("key", [None, "", "wrong", "A" * 22, "x" * 10_000])
def test_only_the_key_opens_closes_reveals_or_resets(room, key):
    store, invite = room
    actions = [lambda: store.open_question(invite.code, key, CHOICE),
               lambda: store.close_question(invite.code, key, "check"),
               lambda: store.reveal(invite.code, key, "check", (1.0,)),
               lambda: store.reset(invite.code, key, "check"),
               lambda: store.close_class(invite.code, key)]
    for action in actions:
        with pytest.raises(SpecDecError, match="only the instructor"):
            action()
    assert store.asked(invite.code, "check").state == "open"
    assert not store.is_instructor(invite.code, key)
    assert store.is_instructor(invite.code, invite.key)


def test_another_class_key_is_not_this_class_key(store):
    first, second = store.open_class(), store.open_class()
    with pytest.raises(SpecDecError, match="only the instructor"):
        store.open_question(first.code, second.key, CHOICE)


def test_the_key_is_stored_only_as_its_hash(store, tmp_path):
    invite = store.open_class()
    raw = (tmp_path / "class.sqlite").read_bytes() + b"".join(
        p.read_bytes() for p in tmp_path.glob("class.sqlite-*"))
    assert invite.key.encode() not in raw
    assert key_matches(invite.key, store.engine.connect().exec_driver_sql(
        "select key_hash from specdec_classes").scalar())


def test_reveal_shows_the_truth_and_reset_forgets(room):
    store, invite = room
    store.answer(invite.code, "check", BROWSERS[0], (1.0,))
    store.reveal(invite.code, invite.key, "check", (1,))
    asked = store.asked(invite.code, "check")
    assert asked.state == "revealed" and asked.truth == (1.0,)
    assert verdict(store.tally(invite.code, "check"), asked.truth) == ["Right: b. 1 of 1 chose it."]
    store.reset(invite.code, invite.key, "check")
    assert store.asked(invite.code, "check") is None and store.tally(invite.code, "check") is None


def test_a_closed_class_takes_no_answers(room):
    store, invite = room
    store.close_class(invite.code, invite.key)
    with pytest.raises(SpecDecError, match="ended"):
        store.answer(invite.code, "check", BROWSERS[0], (1.0,))


def test_a_restart_loses_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'class.sqlite'}"
    first = ClassStore(url)
    invite = first.open_class()
    first.open_question(invite.code, invite.key, CHOICE)
    for i, browser in enumerate(BROWSERS):
        first.answer(invite.code, "check", browser, (float(i % 4),))
    first.engine.dispose()
    again = ClassStore(url)  # a new process would see the same
    assert again.tally(invite.code, "check").per_option == (3, 3, 2, 2)
    assert again.is_instructor(invite.code, invite.key)


def test_sqlite_store_is_in_wal_mode(store, tmp_path):
    store.open_class()
    with sqlite3.connect(tmp_path / "class.sqlite") as db:
        assert db.execute("pragma journal_mode").fetchone()[0] == "wal"


def test_links_carry_the_code_and_only_the_instructors_the_key():
    student, instructor = class_links("http://10.0.0.5:8501", "ACDEFG", "k" * 22)
    assert student == "http://10.0.0.5:8501/?class=ACDEFG"
    assert instructor == "http://10.0.0.5:8501/?class=ACDEFG&key=" + "k" * 22
    assert class_links("https://x.org/specdec/", "ACDEFG", "k" * 22)[0] == "https://x.org/specdec/?class=ACDEFG"
    for bad in ("foo", "ftp://x", "http://", "javascript:alert(1)"):
        with pytest.raises(SpecDecError):
            class_links(bad, "ACDEFG", "k" * 22)


def test_a_bad_database_url_is_one_line(monkeypatch):
    monkeypatch.setenv("SPECDEC_CLASS_DB", "nosuchdb://x")
    with pytest.raises(SpecDecError, match="SPECDEC_CLASS_DB"):
        ClassStore()
