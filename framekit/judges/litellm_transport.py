"""The litellm transport: every provider litellm speaks, here or in worker processes.

litellm spends a few ms of CPU per call, so ``processes=N`` moves the calls into worker
processes (:mod:`framekit.judges.workers`); either way each failure is classified where
it happened (:mod:`framekit.judges.litellm_faults`).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import TYPE_CHECKING, Any

from framekit._aio import bounded
from framekit._errors import JudgeError
from framekit.judges import _litellm
from framekit.judges.base import ChatRequest
from framekit.judges.faults import Fault
from framekit.judges.litellm_call import call_litellm
from framekit.judges.litellm_faults import classify
from framekit.judges.structured import build_call_kwargs
from framekit.judges.transport import Mode, RawReply, TransportName

if TYPE_CHECKING:
    from framekit.judges.litellm_judge import Judge
    from framekit.judges.workers import WorkerPool


class LitellmTransport:
    """Calls through ``litellm.acompletion`` with the judge's current parameters."""

    name: TransportName = "litellm"
    # litellm's OpenAI-family clients refuse to send without a key ("Missing credentials").
    requires_key = True

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self.pool: WorkerPool | None = None
        self._stop_pool: weakref.finalize[Any, Any] | None = None
        self._pool_lock = threading.Lock()

    async def open(self) -> None:
        """Import litellm (seconds, so off the event loop), or start the worker
        processes and wait until each has."""
        if self.judge.processes == 1:
            await asyncio.to_thread(_litellm.litellm)
            return
        with self._pool_lock:
            if self.pool is None:
                from framekit.judges.workers import WorkerPool

                self.pool = WorkerPool(self.judge.processes, self.judge.secrets)
                # Stops the workers when the judge is collected or the interpreter exits.
                self._stop_pool = weakref.finalize(self, self.pool.close)
            pool = self.pool
        try:
            await pool.started()
        except JudgeError:
            self.close()  # the next run tries afresh (after the environment is mended)
            raise

    async def call(
        self, request: ChatRequest, messages: list[dict[str, Any]], mode: Mode
    ) -> RawReply | Fault:
        params = self.judge._call_params()
        call = build_call_kwargs(request, messages, mode)
        try:
            # litellm's timeout bounds each read, not the whole answer: a server that
            # trickles its reply byte by byte would hold the call far longer.
            pool = self.pool
            if pool is not None:
                reply: RawReply = await bounded(
                    pool.call(params, call, self.judge.secrets), float(params["timeout"])
                )
                return reply
            return await bounded(call_litellm(params, call), float(params["timeout"]))
        except (asyncio.CancelledError, JudgeError):
            raise
        except Exception as exc:
            return classify(exc, self.judge.secrets)

    async def release(self) -> None:
        """Nothing to free per run: litellm keeps its own clients."""

    def close(self) -> None:
        """Stop the worker processes (if any); a later run starts new ones."""
        with self._pool_lock:
            stop, self._stop_pool, self.pool = self._stop_pool, None, None
        if stop is not None:
            stop()

    def __getstate__(self) -> dict[str, Any]:
        # A copy (pickle, copy.deepcopy) starts its own workers when it first runs.
        state = dict(self.__dict__)
        state.update(pool=None, _stop_pool=None, _pool_lock=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pool_lock = threading.Lock()
