"""`python -m specdec class open | close | export`: a class's links, its end, and its answers.

The CLI reaches the class store itself (SPECDEC_CLASS_DB, or the SQLite file in the cache folder),
so it acts as the store's owner: closing or exporting a class needs its code, not its key.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from specdec.classroom.invites import class_links, clean_code, spoken, write_qr
from specdec.errors import SpecDecError
from specdec.paths import cache_root

DEFAULT_BASE_URL = "http://localhost:8501"
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet would run such a cell as a formula


def add_class_parser(commands) -> None:
    parser = commands.add_parser("class", help="a class answering together: open one (links and a QR "
                                 "code), close it, export its answers")
    actions = parser.add_subparsers(dest="class_action", metavar="open|close|export", required=True,
                                    parser_class=type(parser))
    opening = actions.add_parser("open", help="a new class: the student link, the instructor link, a QR code")
    opening.add_argument("--base-url", default=DEFAULT_BASE_URL,
                         help=f"the address students open the app at (default {DEFAULT_BASE_URL})")
    opening.add_argument("--qr", type=Path, help="where to write the student link's QR code "
                         "(default: class-CODE.png in the cache folder)")
    opening.add_argument("--json", action="store_true", help="code, student_url, instructor_url, qr_png")
    closing = actions.add_parser("close", help="end a class: no more answers")
    closing.add_argument("code", help="the class code, as `class open` printed it")
    export = actions.add_parser("export", help="every answer in a class")
    export.add_argument("code", help="the class code, as `class open` printed it")
    export.add_argument("--csv", action="store_true", help="CSV (the default and only format)")
    export.add_argument("--output", type=Path, help="write here instead of to standard output")


def run_class(args: argparse.Namespace) -> None:
    from specdec.classroom.store import ClassStore  # SQLAlchemy: only for this command

    store = ClassStore()
    if args.class_action == "open":
        _open(store, args)
    elif args.class_action == "close":
        code = clean_code(args.code)
        store.close_class(code, owner=True)
        print(f"class {spoken(code)} closed: answers are no longer taken")
    else:
        _export(store, clean_code(args.code), args.output)


def _open(store, args: argparse.Namespace) -> None:
    class_links(args.base_url, "AAAAAA", "k" * 22)  # a bad --base-url is refused before a class opens
    invite = store.open_class()
    student, instructor = class_links(args.base_url, invite.code, invite.key)
    qr = write_qr(student, args.qr or cache_root() / "classes" / f"class-{invite.code}.png")
    if args.json:
        print(json.dumps({"code": invite.code, "student_url": student, "instructor_url": instructor,
                          "qr_png": str(qr)}))
        return
    print(f"class {spoken(invite.code)} is open (store: {store.where})")
    print(f"  students open:   {student}")
    print(f"  QR code (PNG):   {qr}")
    print(f"  instructor link: {instructor}")
    print("  keep the instructor link to yourself: it opens, closes and reveals questions")


def _cell(value) -> str:
    text = str(value)
    return "'" + text if text.startswith(FORMULA_START) else text


def _export(store, code: str, output: Path | None) -> None:
    rows = store.export(code)
    try:
        file = open(output, "w", newline="", encoding="utf-8") if output else sys.stdout  # noqa: SIM115
    except OSError as error:
        raise SpecDecError(f"cannot write {output}: {error.strerror}") from error
    try:
        writer = csv.writer(file)
        writer.writerow(["question", "browser", "nickname", "answer", "answered_at"])
        for row in rows:
            when = datetime.fromtimestamp(row["answered_at"], UTC).isoformat(timespec="seconds")
            writer.writerow([row["question"], row["browser"], _cell(row["nickname"]), _cell(row["answer"]),
                             when])
    finally:
        if output:
            file.close()
    if output:
        print(f"{len(rows)} answers written to {output}", file=sys.stderr)
