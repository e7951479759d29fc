"""The one lock around the models. The loaded pair is shared by every session of the app's process;
each use of the models (one round, one chunk of a prompt, one timed pass) happens under this lock,
and nothing else does.

It is a ticket lock: requests are served in the order they came, so a session can be told how many
requests are ahead of it, and none waits behind a stream of later ones.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from specdec.clock import now


class ModelLock:
    """A first-come, first-served lock that knows how many requests are ahead of a waiting one."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._next_ticket = 0  # handed to the next request
        self._serving = 0  # the ticket that may hold the lock now
        self._abandoned: set[int] = set()  # tickets whose requests gave up waiting

    def _ahead(self, ticket: int) -> int:
        return ticket - self._serving - sum(self._serving < t < ticket for t in self._abandoned)

    def _skip_abandoned(self) -> None:
        while self._serving in self._abandoned:
            self._abandoned.discard(self._serving)
            self._serving += 1

    def acquire(self, on_wait: Callable[[int], None] | None = None) -> None:
        """Wait for our turn, then hold the lock. While waiting, `on_wait(requests ahead of us)` is
        told the count each time it changes (every release wakes the waiters). If waiting ends in an
        exception (a page rerun interrupts `on_wait`), the ticket is given up, never left blocking."""
        with self._changed:
            ticket = self._next_ticket
            self._next_ticket += 1
        told = None
        try:
            while True:
                with self._changed:
                    if self._serving == ticket:
                        return
                    ahead = self._ahead(ticket)
                    if ahead == told or on_wait is None:
                        self._changed.wait()
                        continue
                told = ahead
                on_wait(ahead)  # outside the mutex: it may draw on a page
        except BaseException:
            with self._changed:
                self._abandoned.add(ticket)
                self._skip_abandoned()
                self._changed.notify_all()
            raise

    def release(self) -> None:
        """Tickets are served in order, so releasing just lets the next one in."""
        with self._changed:
            self._serving += 1
            self._skip_abandoned()
            self._changed.notify_all()

    def locked(self) -> bool:
        """True while a request holds the lock (or waits for it)."""
        return self.waiting() > 0

    def waiting(self) -> int:
        """Requests holding or waiting for the lock now."""
        with self._changed:
            return self._next_ticket - self._serving - len(self._abandoned)

    @contextlib.contextmanager
    def hold(self, on_wait: Callable[[int], None] | None = None) -> Iterator[None]:
        self.acquire(on_wait)
        try:
            yield
        finally:
            self.release()

    def __enter__(self) -> ModelLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


MODEL_LOCK = ModelLock()


def held(lock, on_wait: Callable[[int], None] | None = None):
    """`lock.hold(on_wait)` for a ModelLock; a plain `with lock` for any other lock (tests use those)."""
    return lock.hold(on_wait) if isinstance(lock, ModelLock) else lock


def locked_steps(iterator: Iterator, lock, on_wait: Callable[[int], None] | None = None):
    """(item, seconds) per item of `iterator`; each item is computed under `lock`, timed inside it, and
    the lock is released between items so other sessions interleave."""
    while True:
        with held(lock, on_wait):
            start = now()
            item = next(iterator, None)
            seconds = now() - start
        if item is None:
            return
        yield item, seconds

