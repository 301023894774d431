"""Running coroutines from synchronous code: Ctrl-C that stops cleanly, and Jupyter.

``run_sync`` owns the event loop of a synchronous call, so it also owns what Ctrl-C
means there: the first SIGINT cancels the run (every answer received so far is in the
cache when it stops: the cache's writer thread is drained first) and raises
:class:`RunInterrupted` with the message the run left through :func:`note_interrupted`;
a second SIGINT stops at once, as Python normally would.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import signal
import sys
import threading
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypeVar

from framekit._errors import RunInterrupted

T = TypeVar("T")


@dataclass
class _Interrupt:
    requested: bool = False
    message: str | None = None


_CURRENT: contextvars.ContextVar[_Interrupt | None] = contextvars.ContextVar(
    "framekit_interrupt", default=None
)

_DEFAULT_MESSAGE = "framekit: run interrupted"


async def bounded(call: Awaitable[T], seconds: float) -> T:
    """Await ``call`` for at most ``seconds`` (no extra task per call on 3.11+)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await call
    return await asyncio.wait_for(call, seconds)  # pragma: no cover


class Deadlines:
    """Bounds many awaits of the same length with one timer among them, not one each.

    ``asyncio.timeout`` arms a timer in the loop's heap for every call and cancels it
    after (a cold row's few percent of CPU at a fast endpoint). Every call bounded here
    has the same length, so their deadlines come in the order the calls start: one timer,
    armed for the oldest call still running, cancels the calls that have overrun and
    re-arms for the next. An overrun call raises ``TimeoutError``, as under
    ``asyncio.timeout``; a cancel from elsewhere stays a cancel. For one event loop.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        # call id -> (its task, its deadline), in the order the calls started.
        self._running: dict[int, tuple[asyncio.Task[Any], float]] = {}
        self._overrun: set[int] = set()
        self._ids = itertools.count()
        self._timer: asyncio.TimerHandle | None = None

    async def run(self, call: Awaitable[T]) -> T:
        """Await ``call`` for at most :attr:`seconds`."""
        if sys.version_info < (3, 11):  # pragma: no cover - no Task.uncancel: one each
            return await bounded(call, self.seconds)
        task = asyncio.current_task()
        assert task is not None, "awaited outside a task"
        loop = task.get_loop()
        deadline = loop.time() + self.seconds
        ident = next(self._ids)
        self._running[ident] = (task, deadline)
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._expire, loop)
        cancelling = task.cancelling()
        try:
            return await call
        except asyncio.CancelledError as exc:
            # Ours (and no other cancel pending): a timeout, as asyncio.timeout says it.
            if ident in self._overrun and task.uncancel() <= cancelling:
                raise TimeoutError from exc
            raise
        finally:
            del self._running[ident]
            self._overrun.discard(ident)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        now = loop.time()
        for ident, (task, deadline) in self._running.items():
            if ident in self._overrun:
                continue  # cancelled already, not yet unwound
            if deadline > now:
                self._timer = loop.call_at(deadline, self._expire, loop)
                break
            self._overrun.add(ident)
            task.cancel()  # unwinds later: nothing leaves the table while it is read

    def close(self) -> None:
        """Disarm the timer (the calls are over)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def note_interrupted(message: str) -> None:
    """Called by a run being cancelled: the text of the :class:`RunInterrupted` to raise."""
    state = _CURRENT.get()
    if state is not None and state.requested:
        state.message = message


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion and return its result.

    With no running loop the coroutine runs on a new loop in this thread. Inside a running
    loop (Jupyter) it runs on a fresh loop in a helper thread, because blocking the
    notebook's own loop would deadlock it; the caller blocks until it finishes. Either
    way Ctrl-C cancels it and raises :class:`RunInterrupted`.

    Examples
    --------
    >>> async def answer() -> int:
    ...     return 42
    >>> run_sync(answer())
    42
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run_here(coro)
    return _run_in_thread(coro)


def _start(
    coro: Coroutine[Any, Any, T],
) -> tuple[asyncio.AbstractEventLoop, asyncio.Task[T], _Interrupt]:
    state = _Interrupt()
    loop = asyncio.new_event_loop()
    # The task copies the context at creation, so the run can find its interrupt state.
    token = _CURRENT.set(state)
    try:
        task = loop.create_task(coro)
    finally:
        _CURRENT.reset(token)
    return loop, task, state


def _interrupted(state: _Interrupt) -> RunInterrupted:
    return RunInterrupted(state.message or _DEFAULT_MESSAGE)


def _run_here(coro: Coroutine[Any, Any, T]) -> T:
    loop, task, state = _start(coro)

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        if state.requested:  # a second Ctrl-C: stop now, whatever is left
            raise KeyboardInterrupt
        state.requested = True
        loop.call_soon_threadsafe(task.cancel)

    # Only the main thread receives signals; a handler the user installed is left alone.
    ours = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )
    if ours:
        signal.signal(signal.SIGINT, on_sigint)
    try:
        try:
            return loop.run_until_complete(task)
        except asyncio.CancelledError:
            if state.requested:
                raise _interrupted(state) from None
            raise
    finally:
        if ours:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        _close(loop, wait_for_threads=not state.requested)


def _close(loop: asyncio.AbstractEventLoop, wait_for_threads: bool) -> None:
    """What ``asyncio.run`` does on the way out, minus waiting on threads after Ctrl-C."""
    try:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        if wait_for_threads:
            # After Ctrl-C a worker thread may still be importing litellm (seconds):
            # control goes back to the user without waiting for it.
            loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()


def _run_in_thread(coro: Coroutine[Any, Any, T]) -> T:
    loop, task, state = _start(coro)
    result: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        asyncio.set_event_loop(loop)
        try:
            result["value"] = loop.run_until_complete(task)
        except BaseException as exc:  # re-raised in the caller's thread
            result["error"] = exc
        finally:
            _close(loop, wait_for_threads=not state.requested)
            done.set()

    threading.Thread(target=target, name="framekit-run", daemon=True).start()
    # An Event, not Thread.join: on Python 3.11 a Ctrl-C inside join() marks the thread
    # finished while it still runs, and the run's own report would be lost.
    try:
        while not done.wait(0.1):
            pass
    except KeyboardInterrupt:
        # Jupyter's "interrupt kernel" lands here, in the caller's thread.
        state.requested = True
        with contextlib.suppress(RuntimeError):  # the run finished and closed its loop
            loop.call_soon_threadsafe(task.cancel)
        done.wait(5.0)
        raise _interrupted(state) from None
    error = result.get("error")
    if error is not None:
        if isinstance(error, asyncio.CancelledError) and state.requested:
            raise _interrupted(state) from None
        raise error
    return result["value"]  # type: ignore[no-any-return]
