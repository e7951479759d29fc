"""The class store on PostgreSQL (SPECDEC_CLASS_DB=postgresql://...): a throwaway server, started and
stopped here from Debian's package (scripts/setup.sh test installs it), answering as SQLite does,
with 50 students at once through two stores, and keeping everything across the server's restart."""

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from specdec.classroom.questions import Question
from specdec.classroom.store import ClassStore
from specdec.errors import SpecDecError

CHOICE = Question("check", "Why?", options=("a", "b", "c", "d"))
STUDENTS = 50


def postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


class Server:
    """initdb in a temporary folder and pg_ctl on a free port; as `nobody` when run as root (the
    server refuses to run as root)."""

    def __init__(self, bin_dir: Path):
        self.bin, self.dir = bin_dir, Path(tempfile.mkdtemp(prefix="specdec-pg-"))
        self.as_user = ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            self.dir.chmod(0o755)
            shutil.chown(self.dir, "nobody")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.run("initdb", "-D", str(self.dir / "data"), "-A", "trust", "-U", "specdec", "--no-sync")
        self.url = f"postgresql://specdec@127.0.0.1:{self.port}/postgres"

    def run(self, tool: str, *args: str) -> None:
        done = subprocess.run([*self.as_user, str(self.bin / tool), *args], capture_output=True, text=True,
                              timeout=120)
        if done.returncode:
            raise RuntimeError(f"{tool}: {done.stderr.strip() or done.stdout.strip()}")

    def start(self) -> None:
        self.run("pg_ctl", "-D", str(self.dir / "data"), "-l", str(self.dir / "log"), "-w", "-o",
                 f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off", "start")

    def stop(self) -> None:
        self.run("pg_ctl", "-D", str(self.dir / "data"), "-m", "fast", "-w", "stop")


@pytest.fixture(scope="module")
def server():
    bin_dir = postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (scripts/setup.sh test installs Debian's postgresql)")
    if os.geteuid() == 0 and not shutil.which("runuser"):
        pytest.skip("running as root without runuser: the server cannot be started as another user")
    try:
        pg = Server(bin_dir)
        pg.start()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        pytest.skip(f"a throwaway PostgreSQL server did not start: {str(error)[:200]}")
    yield pg
    try:
        pg.stop()
    finally:
        shutil.rmtree(pg.dir, ignore_errors=True)


@pytest.mark.slow
def test_postgres_store_keeps_one_answer_per_browser_and_the_key(server, monkeypatch):
    monkeypatch.setenv("SPECDEC_CLASS_DB", server.url)
    store = ClassStore()
    assert store.engine.dialect.name == "postgresql"
    invite = store.open_class()
    with pytest.raises(SpecDecError, match="only the instructor"):
        store.open_question(invite.code, "A" * 22, CHOICE)
    store.open_question(invite.code, invite.key, CHOICE)
    for values in ((0.0,), (0.0,), (3.0,)):  # replayed, then changed
        store.answer(invite.code, "check", "browser-0001", values)
    with pytest.raises(SpecDecError):
        store.answer(invite.code, "check", "browser-0002", (4.0,))
    assert store.tally(invite.code, "check").per_option == (0, 0, 0, 1)
    store.reveal(invite.code, invite.key, "check", (3,))
    with pytest.raises(SpecDecError, match="closed"):
        store.answer(invite.code, "check", "browser-0002", (1.0,))
    assert [row["answer"] for row in store.export(invite.code)] == ["d"]


@pytest.mark.slow
def test_postgres_fifty_students_through_two_stores_then_a_restart(server):
    stores = [ClassStore(server.url), ClassStore(server.url)]  # two replicas
    invite = stores[0].open_class()
    stores[1].open_question(invite.code, invite.key, CHOICE)
    errors, start = [], threading.Barrier(STUDENTS)

    def student(i: int) -> None:
        start.wait()
        for _ in range(2):  # every submission sent twice
            try:
                stores[i % 2].answer(invite.code, "check", f"browser-{i:04d}", (float(i % 4),))
            except Exception as error:  # noqa: BLE001
                errors.append(repr(error))

    threads = [threading.Thread(target=student, args=(i,)) for i in range(STUDENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[:3]
    assert stores[0].tally(invite.code, "check").per_option == (13, 13, 12, 12)
    server.stop()
    server.start()
    again = ClassStore(server.url)
    assert again.tally(invite.code, "check").count == STUDENTS
    stores[0].answer(invite.code, "check", "browser-0000", (1.0,))  # an old store reconnects
    assert again.tally(invite.code, "check").per_option == (12, 14, 12, 12)
