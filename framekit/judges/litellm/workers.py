"""Worker processes that make a judge's litellm calls: ``Judge(processes=N)``.

litellm spends 3.5-4 ms of CPU on every call (building the request, parsing it into its
own objects, pricing it, logging objects), so one Python process tops out near 250 calls
a second however many calls are in flight. Against a fast endpoint that, not the
endpoint, is the limit. With ``processes=N`` the calls are made by N worker processes;
the calling process keeps everything else: pacing, retries, re-asks, parsing and the
cache. A worker is a fresh interpreter (``python -m framekit.judges.litellm.workers``), so a
user's script or notebook is never re-imported, and it exits when its stdin closes, so
it cannot outlive its parent, even one killed with SIGKILL.

Wire format, both ways: a 4-byte big-endian length, then a pickle. A worker answers
``(0, "ready", pid)`` once litellm is imported. Each call is ``(id, params, call,
secrets)``: the judge's parameters as they are now (so a judge changed between runs is
never answered with stale ones) and the strings to redact, the API key among them, which
travels only over this pipe, never on a command line or in the environment. The answer
is ``(id, "ok", RawReply)`` or ``(id, "fault", Fault)``: failures are classified in the
worker, where litellm's exception is, and only the verdict crosses.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path
from typing import IO, Any

from framekit import _secrets
from framekit._errors import FaultRaised, JudgeError

_HEADER = struct.Struct(">I")
#: Seconds a worker may take to import litellm and say it is ready.
START_TIMEOUT_S = 120.0
#: Times each worker may be replaced after dying before the pool gives up.
MAX_RESTARTS_PER_WORKER = 3
#: Lines of a worker's stderr kept to explain why it died.
_STDERR_TAIL = 20


def read_frame(stream: IO[bytes]) -> Any:
    """The next object on ``stream``; ``EOFError`` when it closed."""
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError
    size = _HEADER.unpack(head)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


class _Worker:
    """One worker process and the three threads that talk to it (calls out, replies in,
    its stderr relayed with secrets redacted).

    Threads, not the event loop, own the pipes: a judge outlives any one run, and each
    synchronous run has its own event loop. A reply is handed to the loop of the call
    that waits for it.
    """

    def __init__(self, index: int, secrets: list[str]) -> None:
        self.index = index
        #: The latest secrets sent, to redact what the worker prints.
        self.secrets = secrets
        self.pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]] = {}
        self.ready = threading.Event()
        self.exited = threading.Event()
        self.stderr_tail: deque[str] = deque(maxlen=_STDERR_TAIL)
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        env = dict(os.environ)
        # The package this process runs, even when it is only on sys.path (a checkout).
        root = str(Path(__file__).resolve().parents[3])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "framekit.judges.litellm.workers"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            # Ctrl-C in a terminal reaches the whole process group; the parent decides.
            start_new_session=True,
        )
        threads = [
            threading.Thread(target=target, name=f"framekit-worker-{index}", daemon=True)
            for target in (self._read_replies, self._write_calls, self._relay_stderr)
        ]
        for thread in threads:
            thread.start()
        self._stderr_relay = threads[2]

    @property
    def alive(self) -> bool:
        return not self.exited.is_set()

    def submit(
        self,
        rid: int,
        params: dict[str, Any],
        call: dict[str, Any],
        secrets: list[str],
        future: asyncio.Future[Any],
    ) -> None:
        self.secrets = secrets
        self.pending[rid] = (future.get_loop(), future)
        self._outbox.put(pickle.dumps((rid, params, call, secrets), pickle.HIGHEST_PROTOCOL))
        if self.exited.is_set():  # died after it was picked: the reader's sweep is over
            self._fail_pending()

    def _fail_pending(self) -> None:
        from framekit.judges.faults import Fault

        lost = Fault("transient", f"judge worker process {self.index} exited")
        for rid in list(self.pending):
            entry = self.pending.pop(rid, None)
            if entry is not None:
                _resolve(entry, ("fault", lost))

    def _write_calls(self) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        while True:
            item = self._outbox.get()
            batch = [item]
            # Calls queued meanwhile go out in the same write.
            with contextlib.suppress(queue.Empty):
                while item is not None:
                    item = self._outbox.get_nowait()
                    batch.append(item)
            try:
                for frame in batch:
                    if frame is None:
                        stdin.close()
                        return
                    stdin.write(_HEADER.pack(len(frame)) + frame)
                stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                return  # the reader sees the exit and fails what is pending

    def _read_replies(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            while True:
                rid, kind, payload = read_frame(stdout)
                if kind == "ready":
                    self.ready.set()
                    continue
                entry = self.pending.pop(rid, None)
                if entry is not None:
                    _resolve(entry, (kind, payload))
        except (EOFError, OSError, pickle.UnpicklingError):
            pass
        self.process.wait()
        self.exited.set()
        self.ready.set()  # wake anyone waiting for a start that will never come
        self._fail_pending()

    def _relay_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        for raw in stderr:
            line = _secrets.redact(raw.decode("utf-8", "replace"), self.secrets)
            self.stderr_tail.append(line.rstrip())
            with contextlib.suppress(Exception):
                sys.stderr.write(line)

    def close(self) -> None:
        self._outbox.put(None)

    def why_exited(self) -> str:
        self._stderr_relay.join(2.0)  # its last words may still be in the pipe
        tail = "\n".join(self.stderr_tail) or "(it printed nothing)"
        return (
            f"judge worker process {self.index} exited with code {self.process.returncode}:\n{tail}"
        )


def _resolve(entry: tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]], value: Any) -> None:
    loop, future = entry

    def settle() -> None:
        if not future.done():
            future.set_result(value)

    with contextlib.suppress(RuntimeError):  # that run's loop has already closed
        loop.call_soon_threadsafe(settle)


class WorkerPool:
    """``processes`` worker processes making one judge's calls; shared by all its runs."""

    def __init__(self, processes: int, secrets: list[str]) -> None:
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._restarts_left = MAX_RESTARTS_PER_WORKER * processes
        # Known before any call: a worker may print before its first one.
        self._secrets = secrets
        self._workers = [_Worker(i, secrets) for i in range(processes)]

    async def started(self) -> None:
        """Wait until every worker has imported litellm; :class:`JudgeError` with its
        stderr if one could not."""
        await asyncio.to_thread(self._wait_ready)
        dead = [w for w in self._workers if not w.alive]
        if dead:
            raise JudgeError(dead[0].why_exited())

    def _wait_ready(self) -> None:
        for w in list(self._workers):
            if not w.ready.wait(START_TIMEOUT_S):
                raise JudgeError(
                    f"judge worker process {w.index} did not start in {START_TIMEOUT_S:g} s"
                )

    async def call(self, params: dict[str, Any], call: dict[str, Any], secrets: list[str]) -> Any:
        """``litellm.acompletion(**params, **call)`` in the least busy worker: a
        ``RawReply``, or raises ``FaultRaised``."""
        self._secrets = secrets
        worker = self._pick()
        rid = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        worker.submit(rid, params, call, secrets, future)
        try:
            kind, payload = await future
        finally:
            worker.pending.pop(rid, None)
        if kind == "ok":
            return payload
        raise FaultRaised(payload)

    def _pick(self) -> _Worker:
        """The ready worker with the fewest calls in flight. A worker that died (killed,
        out of memory) is replaced; its calls in flight were failed as transient, so the
        executor sends them again."""
        with self._lock:
            for i, w in enumerate(self._workers):
                if not w.alive and self._restarts_left > 0:
                    self._restarts_left -= 1
                    self._workers[i] = _Worker(i, self._secrets)
            live = [w for w in self._workers if w.alive]
            if not live:
                raise JudgeError(self._workers[0].why_exited())
            # A replacement queues calls until it has imported litellm: prefer the ready.
            return min(live, key=lambda w: (not w.ready.is_set(), len(w.pending)))

    def close(self) -> None:
        """Close the workers' stdin; they finish their calls in flight and exit."""
        for w in self._workers:
            w.close()
        for w in self._workers:
            try:
                w.process.wait(5.0)
            except subprocess.TimeoutExpired:
                w.process.kill()


# -- the worker process ------------------------------------------------------------------


def _serve() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Frames go out on a private copy of stdout; anything printed (by litellm, say) goes
    # to stderr, where the parent relays it, instead of corrupting the frame stream.
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    from framekit._aio import bounded
    from framekit.judges.litellm import litellm_module
    from framekit.judges.litellm.call import call_litellm, classify

    litellm_module()
    # Everything imported so far lives as long as the worker: keep the collector from
    # scanning it again and again (a full pass over litellm's objects stalls ~0.2 s).
    gc.collect()
    gc.freeze()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=2**31)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        transport, _ = await loop.connect_write_pipe(asyncio.Protocol, out)

        def send(obj: object) -> None:
            data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
            transport.write(_HEADER.pack(len(data)) + data)

        async def answer(
            rid: int, params: dict[str, Any], call: dict[str, Any], secrets: list[str]
        ) -> None:
            try:
                reply = await bounded(call_litellm(params, call), float(params["timeout"]))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                send((rid, "fault", classify(exc, secrets)))
            else:
                send((rid, "ok", reply))

        send((0, "ready", os.getpid()))
        tasks: set[asyncio.Task[None]] = set()
        while True:
            try:
                size = _HEADER.unpack(await reader.readexactly(_HEADER.size))[0]
                frame = pickle.loads(await reader.readexactly(size))
            except asyncio.IncompleteReadError:
                break
            task = asyncio.create_task(answer(*frame))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        # stdin closed: the parent is done (or gone). Finish what is in flight, briefly.
        if tasks:
            await asyncio.wait(tasks, timeout=10.0)

    asyncio.run(main())


if __name__ == "__main__":
    _serve()
