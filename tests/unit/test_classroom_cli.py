"""`python -m specdec class open | close | export`: links, a QR code, the end of a class, its answers."""

import csv
import io
import json
import subprocess
import sys
from urllib.parse import parse_qs, urlsplit

import pytest

from specdec.classroom.questions import Question
from specdec.classroom.store import ClassStore
from specdec.cli.main import main


@pytest.fixture
def class_db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'class.sqlite'}"
    monkeypatch.setenv("SPECDEC_CLASS_DB", url)
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path / "cache"))
    return url


def open_class(capsys, *args) -> dict:
    assert main(["class", "open", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_open_prints_both_links_and_writes_a_qr_code(class_db, capsys, tmp_path):
    opened = open_class(capsys, "--base-url", "http://10.1.2.3:8600")
    student, instructor = urlsplit(opened["student_url"]), urlsplit(opened["instructor_url"])
    assert student.netloc == "10.1.2.3:8600" and parse_qs(student.query) == {"class": [opened["code"]]}
    key = parse_qs(instructor.query)["key"][0]
    assert parse_qs(instructor.query)["class"] == [opened["code"]] and key not in opened["student_url"]
    assert ClassStore(class_db).is_instructor(opened["code"], key)
    png = open(opened["qr_png"], "rb").read()
    assert png.startswith(b"\x89PNG") and len(png) > 200


def test_open_in_words_says_which_link_to_keep(class_db, capsys):
    assert main(["class", "open"]) == 0
    out = capsys.readouterr().out
    assert "students open:   http://localhost:8501/?class=" in out and "instructor link:" in out


def test_close_ends_the_class_and_export_writes_every_answer(class_db, capsys, tmp_path):
    opened = open_class(capsys)
    store = ClassStore(class_db)
    key = parse_qs(urlsplit(opened["instructor_url"]).query)["key"][0]
    store.open_question(opened["code"], key, Question("check", "?", options=("a", "b")))
    store.answer(opened["code"], "check", "browser-0001", (1.0,), "=HYPERLINK(1)")
    store.answer(opened["code"], "check", "browser-0002", (0.0,))
    assert main(["class", "close", opened["code"].lower()]) == 0
    assert store.class_closed(opened["code"])
    capsys.readouterr()
    assert main(["class", "export", opened["code"], "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["browser"], r["answer"]) for r in rows] == [("browser-0001", "b"), ("browser-0002", "a")]
    assert rows[0]["nickname"] == "'=HYPERLINK(1)"  # a spreadsheet shows it, never runs it
    assert main(["class", "export", opened["code"], "--output", str(tmp_path / "out.csv")]) == 0
    assert (tmp_path / "out.csv").read_text().count("\n") == 3


@pytest.mark.parametrize("argv, message", [
    (["class", "open", "--base-url", "localhost"], "--base-url"),
    (["class", "close", "NOPE"], "not a class code"),
    (["class", "close", "ACDEFG"], "no class ACDEFG"),
    (["class", "export", "ACDEFG", "--csv"], "no class ACDEFG"),
    (["class"], "required"),
    (["class", "shout"], "invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2(class_db, capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.slow
def test_class_open_as_a_process_without_torch(class_db):
    """The command answers without importing torch (it only reaches the store)."""
    code = ("import sys, runpy; sys.argv = ['specdec', 'class', 'open', '--json']\n"
            "try:\n    runpy.run_module('specdec', run_name='__main__')\n"
            "except SystemExit as e:\n    assert e.code == 0, e.code\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["code"]
