"""The litellm transport: every provider litellm speaks, here or in worker processes.

litellm spends a few ms of CPU per call, so ``processes=N`` moves the calls into worker
processes (:mod:`framekit.judges.litellm.workers`); either way each failure is
classified where it happened (:func:`framekit.judges.litellm.call.classify`).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from framekit._aio import bounded
from framekit._errors import FaultRaised, JudgeError
from framekit.judges.endpoint import Decoding, Endpoint, Limits
from framekit.judges.faults import Fault
from framekit.judges.litellm import litellm_module
from framekit.judges.litellm.call import WANTS_LOGPROBS, call_litellm, classify
from framekit.judges.providers import provider_of
from framekit.judges.request import ChatRequest, Mode, build_call_kwargs
from framekit.judges.shared_prefix import mark_for_anthropic, schema_leads_prefix
from framekit.judges.transport import RawReply, TransportName
from framekit.judges.usage import Price

if TYPE_CHECKING:
    from framekit.judges.litellm.workers import WorkerPool


class LitellmTransport:
    """Calls through ``litellm.acompletion`` with a judge's endpoint, limits and decoding."""

    name: TransportName = "litellm"
    # litellm's OpenAI-family clients refuse to send without a key ("Missing credentials").
    requires_key = True

    def __init__(
        self,
        endpoint: Endpoint,
        limits: Limits,
        decoding: Decoding,
        processes: int = 1,
        pricing: Callable[[], Price | None] = lambda: None,
    ) -> None:
        self.endpoint, self.limits, self.decoding = endpoint, limits, decoding
        self.processes = processes
        self.pool: WorkerPool | None = None
        self._stop_pool: weakref.finalize[Any, Any] | None = None
        self._pool_lock = threading.Lock()
        self._secrets = list(endpoint.secrets())
        #: Set when the endpoint refused a request for logprobs: its later calls go without.
        self.logprobs_refused = False
        # The judge's price rule (framekit.judges.pricing, which reads litellm's price
        # table and so sits above this package), asked once per run.
        self._pricing = pricing
        self._price: Price | None = None

    def params(self) -> dict[str, Any]:
        """Everything ``litellm.acompletion`` gets besides the messages and the answer
        format; the key is read now (see :class:`~framekit.judges.credentials.Credentials`)."""
        endpoint = self.endpoint
        params: dict[str, Any] = {
            "model": endpoint.model,
            "temperature": self.decoding.temperature,
            "max_tokens": self.decoding.max_tokens,
            **self.decoding.params,
            **endpoint.routing,
        }
        if endpoint.api_base:
            params["api_base"] = endpoint.api_base
        key, _ = endpoint.credentials.own()
        if key:
            params["api_key"] = key
        # Retries are ours (429s must reach the shared limiter), never the SDK's.
        params.update(num_retries=0, max_retries=0, timeout=self.limits.timeout)
        return params

    async def open(self) -> None:
        """Import litellm (seconds, so off the event loop), or start the worker
        processes and wait until each has."""
        self._secrets = list(self.endpoint.secrets())  # the environment may have changed
        # Priced here, not by litellm per answer: one rule for every transport and path.
        self._price = await asyncio.to_thread(self._pricing)
        if self.processes == 1:
            await asyncio.to_thread(litellm_module)
            return
        with self._pool_lock:
            if self.pool is None:
                from framekit.judges.litellm.workers import WorkerPool

                self.pool = WorkerPool(self.processes, self._secrets)
                # Stops the workers when the transport is collected or the interpreter exits.
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
        params = self.params()
        model = self.endpoint.model
        custom_base = self.endpoint.base is not None
        call = build_call_kwargs(request, messages, mode, schema_leads_prefix(model, custom_base))
        if request.extra and provider_of(model) == "anthropic":
            # Anthropic caches a prefix only up to a block marked cache_control.
            call["messages"] = mark_for_anthropic(
                request.extra, call["messages"], self.endpoint.model
            )
        asks = (
            bool(request.choices)
            and self.decoding.samples == 1  # a sampled judge's confidence is its vote
            and "logprobs" not in params
            and not self.logprobs_refused
        )
        if asks:
            call[WANTS_LOGPROBS] = True  # if the provider takes them (see takes_logprobs)
        result = await self._call(params, call)
        if (
            asks
            and isinstance(result, Fault)
            and result.kind in ("fatal", "mode")
            and "logprobs" in result.reason.lower()
        ):
            # A model of a provider that takes logprobs refused them (a reasoning model):
            # ask again without, and from now on.
            self.logprobs_refused = True
            return await self.call(request, messages, mode)
        if isinstance(result, RawReply):
            result.cost_usd = result.cost_at(self._price)
        return result

    async def _call(self, params: dict[str, Any], call: dict[str, Any]) -> RawReply | Fault:
        try:
            # litellm's timeout bounds each read, not the whole answer: a server that
            # trickles its reply byte by byte would hold the call far longer.
            pool = self.pool
            if pool is not None:
                reply: RawReply = await bounded(
                    pool.call(params, call, self._secrets), self.limits.timeout
                )
                return reply
            return await bounded(call_litellm(params, call), self.limits.timeout)
        except FaultRaised as failed:  # classified in the worker process
            return failed.fault
        except (asyncio.CancelledError, JudgeError):
            raise
        except Exception as exc:
            return classify(exc, self._secrets)

    async def release(self) -> None:
        """Nothing to free per run: litellm keeps its own clients."""

    def close(self) -> None:
        """Stop the worker processes (if any); a later run starts new ones."""
        with self._pool_lock:
            stop, self._stop_pool, self.pool = self._stop_pool, None, None
        if stop is not None:
            stop()
