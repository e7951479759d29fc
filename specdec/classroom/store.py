"""Where a class's questions and answers are kept: a database every replica of the app shares.

SQLite by default, one file in the cache folder in WAL mode (readers never wait for a writer, and
every process on the machine sees one store), or any SQLAlchemy URL in SPECDEC_CLASS_DB
(postgresql://... is read with psycopg). Nothing is held in a process: a restarted server finds every
class, question and answer where it left them.

Who may do what: anyone with a class's code may answer an open question, once per browser (a second
answer from the same browser replaces the first until the question closes); only a caller with the
class's key opens, closes, reveals or resets a question, and every such call checks the key afresh.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import (
    Column,
    Float,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    delete,
    event,
    insert,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import ArgumentError, IntegrityError, NoSuchModuleError, OperationalError

from specdec.classroom.invites import clean_code, key_hash, key_matches, new_code, new_key
from specdec.classroom.questions import ID_PATTERN, Question, Tally, clean_nickname, tally
from specdec.errors import SpecDecError
from specdec.paths import cache_root

ENVIRONMENT = "SPECDEC_CLASS_DB"
BROWSER_PATTERN = re.compile(r"[A-Za-z0-9_-]{8,64}")
OPEN, CLOSED, REVEALED = "open", "closed", "revealed"
BUSY_TIMEOUT_MS = 10_000  # a writer waits this long for another (SQLite writes one at a time)

metadata = MetaData()
classes = Table(
    "specdec_classes", metadata,
    Column("code", String(8), primary_key=True),
    Column("key_hash", String(64), nullable=False),
    Column("opened_at", Float, nullable=False),
    Column("closed_at", Float),
)
questions = Table(
    "specdec_questions", metadata,
    Column("class_code", String(8), primary_key=True),
    Column("question_id", String(40), primary_key=True),
    Column("spec", Text, nullable=False),  # the question as asked (Question.to_json)
    Column("state", String(10), nullable=False),
    Column("opened_at", Float, nullable=False),
    Column("truth", Text),  # on reveal: the measured answer, a JSON list of numbers
)
answers = Table(
    "specdec_answers", metadata,
    Column("class_code", String(8), nullable=False),
    Column("question_id", String(40), nullable=False),
    Column("browser_id", String(64), nullable=False),
    Column("value", String(200), nullable=False),  # the checked numbers, comma-separated
    Column("nickname", String(24), nullable=False, default=""),
    Column("answered_at", Float, nullable=False),
    UniqueConstraint("class_code", "question_id", "browser_id", name="one_answer_per_browser"),
)


def default_url() -> str:
    return os.environ.get(ENVIRONMENT) or f"sqlite:///{cache_root() / 'classroom.sqlite'}"


def _driver_url(url: str) -> str:
    """postgresql:// and postgres:// are read with psycopg (3), the driver requirements.txt installs."""
    return re.sub(r"^postgres(ql)?://", "postgresql+psycopg://", url)


@dataclass(frozen=True)
class Invite:
    code: str
    key: str


@dataclass(frozen=True)
class Asked:
    """A question as the class sees it now."""

    question: Question
    state: str
    truth: tuple[float, ...] | None


def _write_begin(engine) -> None:
    """SQLite: a write transaction takes the write lock when it begins (BEGIN IMMEDIATE), so a read
    followed by a write never fails when another process wrote in between; it waits its turn."""

    @event.listens_for(engine, "connect")
    def on_connect(connection, _record):
        connection.isolation_level = None  # the transactions below are begun here, not by the driver
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection):
        connection.exec_driver_sql("BEGIN IMMEDIATE" if connection.get_execution_options().get("write")
                                   else "BEGIN")


class ClassStore:
    def __init__(self, url: str | None = None):
        url = url or default_url()
        try:
            if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
                Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
            local = url.startswith("sqlite")
            self.engine = create_engine(_driver_url(url), pool_pre_ping=not local,
                                        connect_args={"check_same_thread": False} if local else {})
            if local:
                _write_begin(self.engine)
            metadata.create_all(self.engine)
        except (ArgumentError, NoSuchModuleError, ImportError) as error:
            raise SpecDecError(f"{ENVIRONMENT}: not a database URL SQLAlchemy can open ({error})") from error
        except OperationalError as error:
            raise SpecDecError(f"cannot open the class store at {self.where}: {error.orig}") from error
        self._writer = self.engine.execution_options(write=True)

    @property
    def where(self) -> str:
        return self.engine.url.render_as_string(hide_password=True) if hasattr(self, "engine") else "?"

    # The instructor's side -------------------------------------------------------------------------

    def open_class(self) -> Invite:
        for _ in range(20):  # a code already taken (one in millions): draw again
            invite = Invite(new_code(), new_key())
            try:
                with self._writer.begin() as db:
                    db.execute(insert(classes).values(code=invite.code, key_hash=key_hash(invite.key),
                                                      opened_at=time.time()))
                return invite
            except IntegrityError:
                continue
        raise SpecDecError("could not draw a free class code")

    def close_class(self, code: str, key: str | None = None, *, owner: bool = False) -> None:
        """Ends the class: no more answers. With the key, or as the store's owner (the CLI, which
        reaches the database itself)."""
        with self._writer.begin() as db:
            row = self._class_row(db, code, key, owner=owner)
            db.execute(update(classes).where(classes.c.code == row.code).values(closed_at=time.time()))

    def is_instructor(self, code: str, key: str | None) -> bool:
        """The key is this class's (False for a wrong or missing key, or an unknown code)."""
        try:
            with self.engine.connect() as db:
                self._class_row(db, code, key)
            return True
        except SpecDecError:
            return False

    def open_question(self, code: str, key: str | None, question: Question) -> None:
        """Asks `question` (again): open for answers. Asked afresh after a reset, or re-opened after a
        close with its answers kept; its shape is the one first asked until a reset."""
        with self._writer.begin() as db:
            row = self._class_row(db, code, key, must_be_open=True)
            where = (questions.c.class_code == row.code) & (questions.c.question_id == question.id)
            if db.execute(select(questions.c.state).where(where)).first() is None:
                db.execute(insert(questions).values(class_code=row.code, question_id=question.id, state=OPEN,
                                                    spec=question.to_json(), opened_at=time.time()))
            else:
                db.execute(update(questions).where(where).values(state=OPEN, truth=None,
                                                                 opened_at=time.time()))

    def close_question(self, code: str, key: str | None, question_id: str) -> None:
        self._set_state(code, key, question_id, CLOSED, None)

    def reveal(self, code: str, key: str | None, question_id: str, truth: tuple[float, ...]) -> None:
        """Closes the question and shows everyone the measured answer beside the room's."""
        values = [float(v) for v in truth]
        self._set_state(code, key, question_id, REVEALED, json.dumps(values))

    def reset(self, code: str, key: str | None, question_id: str) -> None:
        """Forgets the question and every answer to it: it can be asked afresh."""
        with self._writer.begin() as db:
            row = self._class_row(db, code, key)
            for table in (answers, questions):
                db.execute(delete(table).where((table.c.class_code == row.code)
                                               & (table.c.question_id == _question_id(question_id))))

    # Everyone's side -------------------------------------------------------------------------------

    def asked(self, code: str, question_id: str) -> Asked | None:
        """The question as asked in this class now, or None if it has not been (or was reset)."""
        with self.engine.connect() as db:
            row = self._class_row(db, code, None, check_key=False)
            return self._asked(db, row.code, question_id)

    def current(self, code: str) -> tuple[bool, Asked | None]:
        """(whether the class has ended, the question asked or re-opened last, None before any)."""
        with self.engine.connect() as db:
            row = self._class_row(db, code, None, check_key=False)
            last = db.execute(select(questions.c.question_id).where(questions.c.class_code == row.code)
                              .order_by(questions.c.opened_at.desc()).limit(1)).scalar()
            return row.closed_at is not None, (self._asked(db, row.code, last) if last else None)

    def answer_of(self, code: str, question_id: str, browser_id: str) -> tuple[float, ...] | None:
        """This browser's answer to the question, if it has given one."""
        with self.engine.connect() as db:
            text = db.execute(select(answers.c.value).where(
                (answers.c.class_code == clean_code(code))
                & (answers.c.question_id == _question_id(question_id))
                & (answers.c.browser_id == str(browser_id)))).scalar()
        return tuple(float(v) for v in text.split(",")) if text else None

    def class_closed(self, code: str) -> bool:
        with self.engine.connect() as db:
            return self._class_row(db, code, None, check_key=False).closed_at is not None

    def answer(self, code: str, question_id: str, browser_id: str, values: tuple[float, ...],
               nickname: str | None = None) -> None:
        """One browser's answer, kept if the class is running and the question open and the values in
        range (SpecDecError in one line otherwise, and nothing stored). A browser that answers again
        replaces its answer: a replayed or repeated submission counts once."""
        if not isinstance(browser_id, str) or not BROWSER_PATTERN.fullmatch(browser_id):
            raise SpecDecError("this browser's id is missing or malformed: reload the page")
        nickname = clean_nickname(nickname)
        with self._writer.begin() as db:
            row = self._class_row(db, code, None, check_key=False, must_be_open=True)
            asked = self._asked(db, row.code, question_id, lock=True)
            if asked is None:
                raise SpecDecError("this question is not open yet: wait for the instructor")
            if asked.state != OPEN:
                raise SpecDecError("this question is closed: answers are no longer taken")
            checked = asked.question.check(values)
            text = ",".join(repr(v) for v in checked)
            self._upsert(db, dict(class_code=row.code, question_id=asked.question.id, browser_id=browser_id,
                                  value=text, nickname=nickname, answered_at=time.time()))

    def tally(self, code: str, question_id: str) -> Tally | None:
        """The room's answers to the question added up (None if it has not been asked)."""
        with self.engine.connect() as db:
            row = self._class_row(db, code, None, check_key=False)
            asked = self._asked(db, row.code, question_id)
            if asked is None:
                return None
            values = db.execute(select(answers.c.value).where(
                (answers.c.class_code == row.code) & (answers.c.question_id == asked.question.id))).scalars()
            return tally(asked.question, [tuple(float(v) for v in text.split(",")) for text in values])

    def export(self, code: str) -> list[dict]:
        """Every answer in the class, oldest first, with its question's text."""
        with self.engine.connect() as db:
            row = self._class_row(db, code, None, check_key=False)
            specs = {r.question_id: Question.from_json(r.spec) for r in
                     db.execute(select(questions).where(questions.c.class_code == row.code))}
            rows = db.execute(select(answers).where(answers.c.class_code == row.code)
                              .order_by(answers.c.answered_at)).all()
        out = []
        for r in rows:
            question = specs.get(r.question_id)
            values = [float(v) for v in r.value.split(",")]
            shown = ([question.options[int(values[0])]] if question and question.is_choice else values)
            out.append({"question": r.question_id, "browser": r.browser_id, "nickname": r.nickname,
                        "answer": "; ".join(str(v) for v in shown), "answered_at": r.answered_at})
        return out

    # Shared ----------------------------------------------------------------------------------------

    def _class_row(self, db, code, key, *, check_key: bool = True, owner: bool = False,
                   must_be_open: bool = False):
        code = clean_code(code)
        row = db.execute(select(classes).where(classes.c.code == code)).first()
        if row is None:
            raise SpecDecError(f"no class {code}: check the code (it is on the instructor's screen)")
        if check_key and not owner and not key_matches(key, row.key_hash):
            raise SpecDecError("only the instructor's link may do this")
        if must_be_open and row.closed_at is not None:
            raise SpecDecError(f"class {code} has ended")
        return row

    def _asked(self, db, code: str, question_id: str, lock: bool = False) -> Asked | None:
        query = select(questions).where((questions.c.class_code == code)
                                        & (questions.c.question_id == _question_id(question_id)))
        row = db.execute(query.with_for_update(read=True) if lock else query).first()
        if row is None:
            return None
        return Asked(Question.from_json(row.spec), row.state,
                     tuple(json.loads(row.truth)) if row.truth is not None else None)

    def _set_state(self, code, key, question_id, state, truth) -> None:
        with self._writer.begin() as db:
            row = self._class_row(db, code, key)
            done = db.execute(update(questions).where(
                (questions.c.class_code == row.code) & (questions.c.question_id == _question_id(question_id)))
                .values(state=state, truth=truth))
            if done.rowcount == 0:
                raise SpecDecError(f"question {question_id!r} has not been asked in class {row.code}")

    def _upsert(self, db, values: dict) -> None:
        changed = {k: values[k] for k in ("value", "nickname", "answered_at")}
        dialect = {"sqlite": sqlite, "postgresql": postgresql}.get(self.engine.dialect.name)
        if dialect is not None:  # one statement: insert, or replace this browser's answer
            statement = dialect.insert(answers).values(**values).on_conflict_do_update(
                index_elements=["class_code", "question_id", "browser_id"], set_=changed)
            db.execute(statement)
            return
        where = ((answers.c.class_code == values["class_code"])
                 & (answers.c.question_id == values["question_id"])
                 & (answers.c.browser_id == values["browser_id"]))
        if db.execute(update(answers).where(where).values(**changed)).rowcount == 0:
            db.execute(insert(answers).values(**values))


def _question_id(question_id) -> str:
    if not isinstance(question_id, str) or not ID_PATTERN.fullmatch(question_id):
        raise SpecDecError("no such question")
    return question_id
