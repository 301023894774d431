"""How the simulated judge behaves: :class:`SimulatorConfig`, read by the server
(:mod:`framekit.testing._sim_http`), its batch API (:mod:`framekit.testing._sim_batch`)
and the simulator that starts it (:mod:`framekit.testing.simulator`, which re-exports it).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from framekit.testing._sim_cache import STYLES as _CACHE_STYLES
from framekit.testing._sim_echo import ECHO_MODES as _ECHO_MODES
from framekit.testing._sim_logprobs import NoisyJudge
from framekit.testing._sim_pairwise import PairwiseJudge

_RETRY_AFTER_STYLES = (None, "seconds", "ms", "http-date")
_RATES = (
    "error_500_rate",
    "error_503_rate",
    "hang_rate",
    "drop_rate",
    "malformed_rate",
    "null_content_rate",
    "refusal_rate",
)

_UNBIASED = PairwiseJudge()


@dataclass(frozen=True)
class SimulatorConfig:
    """How the simulated judge behaves. Every field is optional; the default is a fast,
    faultless judge.

    Parameters
    ----------
    latency, latency_max : float
        Seconds before each answer: fixed ``latency``, or uniform in
        ``[latency, latency_max]`` when ``latency_max`` is set. Gateway rejections
        (401, storms, rpm 429s) are immediate.
    rpm : float, optional
        Requests per minute (chat and embeddings together), as a token bucket of capacity
        ``max(1, rpm / 60)`` (about one second of budget) refilled at ``rpm / 60`` per
        second; a request finding it empty gets 429.
    rpm_window : float, optional
        If set, ``rpm`` is enforced instead in fixed windows of this many seconds, at
        most ``rpm * rpm_window / 60`` requests each, as providers that quantise a
        minute's budget do (OpenAI counts 60,000 RPM as about 1,000 per second).
    rate_limit_headers : bool
        If True (and ``rpm`` is set), every API answer carries OpenAI's
        ``x-ratelimit-limit-requests`` (the rpm), ``x-ratelimit-remaining-requests`` and
        ``x-ratelimit-reset-requests`` (left in the current bucket or window, and when it
        is full again).
    retry_after : {"seconds", "ms", "http-date", None}
        The wait header on 429s and 429/503 storms: ``Retry-After: <int seconds, >= 1>``,
        ``retry-after-ms: <int ms>``, ``Retry-After: <HTTP date>``, or none.
    error_500_rate, error_503_rate, hang_rate, drop_rate, malformed_rate, \
null_content_rate, refusal_rate : float
        Per chat request probabilities (one draw, so they are mutually exclusive and
        must sum to <= 1) of: 500, 503, sleeping ``hang_seconds`` before answering,
        closing the connection mid-body, a 200 with truncated JSON, ``content: null``,
        and a refusal (``content: null``, ``message.refusal`` set).
    hang_seconds : float
        How long a hang lasts (default 120 s, longer than any sane client timeout).
    trickle_seconds : float
        If > 0, every 200 chat answer is written in 8 pieces spread over this long.
    require_api_key : str, optional
        If set, requests without ``Authorization: Bearer <key>`` get 401.
    reject_response_format : bool
        If True, chat requests with ``response_format.type == "json_schema"`` get 400
        (``param: "response_format"``), so clients fall back to tool calls.
    reject_logprobs : bool
        If True, chat requests asking for ``logprobs`` get 400 (``param: "logprobs"``), as
        OpenAI's reasoning models answer: clients must ask again without them.
    sample_at_temperature : bool
        If True, a chat request at ``temperature`` > 0 gets a label drawn from its
        distribution (the one its logprobs report) rather than the likeliest, as a model
        sampling would: asked several times, it may disagree with itself (batch lines and
        requests at temperature 0 are unchanged).
    echo_headers : {None, "error", "error_500", "answer"}
        Echo the request line and headers (the key among them) in a 400 or 500 error
        body, or inside the answer's explanation (see ``_sim_echo``).
    reply_template : str, optional
        If set, every text answer (not a tool call) is this text with ``{answer}``
        replaced by the answer's JSON: a judge that wraps its verdict in prose, which may
        quote other JSON objects before or after it.
    prompt_cache : {"openai", "anthropic", None}
        How answers report cached prompt tokens (see ``_sim_cache``): ``"openai"``
        (default) reports ``usage.prompt_tokens_details.cached_tokens`` by OpenAI's rule
        (a prefix of 1,024 tokens and more, in 128-token steps, is cached once an earlier
        request with it has been answered), adding Anthropic's
        ``cache_read_input_tokens`` / ``cache_creation_input_tokens`` for ``claude-...``
        models; ``"anthropic"`` adds those for every model; ``None`` caches nothing.
        Batch lines follow the same rule, answered in order.
    embedding_dimensions : int
        Vector length when a request gives no ``dimensions``.
    max_recorded : int
        How many request bodies ``requests`` keeps (oldest dropped first).
    batch_seconds : float
        How long a batch (either batch API) takes from creation to completed.
    batch_failed_rate, batch_expired_rate : float
        Fractions of batch lines that fail (HTTP 500 / ``errored``) or expire.
    batch_validation_error : str, optional
        If set, every batch is rejected as a whole with this reason.
    seed : int, optional
        Seed of the fault / latency RNG (``None``: unseeded). ``reset()`` reseeds.
    noisy_judges : mapping of str to NoisyJudge
        Model name (the request body's ``model``, e.g. ``"weak"`` for litellm's
        ``"openai/weak"``) -> a :class:`NoisyJudge` that picks the label, right with a
        probability it reports (or, miscalibrated, does not); ``"*"`` stands for every
        model not named. One simulator serves a weak and a strong judge as two model
        names, and ``stats()["by_model"]`` counts each one's requests. A label's truth is
        the ``@sim(truth=...)`` marker, else the sha256 choice. Dicts of the fields (or
        that mapping as a JSON string, on the command line) are accepted.
    pairwise_judges : mapping of str to PairwiseJudge
        Model name (or ``"*"``) -> the :class:`PairwiseJudge` answering pairwise requests
        (an ``"A"`` / ``"B"`` / ``"tie"`` label and two ``@sim(quality=q)`` markers, one
        per candidate): a share ``bias`` of answers ``"A"`` whatever the candidates, else
        the better candidate with a logistic probability of the quality difference (see
        ``_sim_pairwise``). Models not named get ``PairwiseJudge()``: no position bias.
        Dicts of the fields, or the mapping as a JSON string, are accepted.

    Examples
    --------
    >>> SimulatorConfig(latency=0.05, rpm=600).rpm
    600
    """

    latency: float = 0.0
    latency_max: float | None = None
    rpm: float | None = None
    rpm_window: float | None = None
    rate_limit_headers: bool = False
    retry_after: str | None = "seconds"
    error_500_rate: float = 0.0
    error_503_rate: float = 0.0
    hang_rate: float = 0.0
    hang_seconds: float = 120.0
    drop_rate: float = 0.0
    malformed_rate: float = 0.0
    null_content_rate: float = 0.0
    refusal_rate: float = 0.0
    trickle_seconds: float = 0.0
    require_api_key: str | None = None
    reject_response_format: bool = False
    reject_logprobs: bool = False
    sample_at_temperature: bool = False
    echo_headers: str | None = None
    reply_template: str | None = None
    prompt_cache: str | None = "openai"
    embedding_dimensions: int = 256
    max_recorded: int = 10_000
    seed: int | None = 0
    batch_seconds: float = 1.0
    batch_failed_rate: float = 0.0
    batch_expired_rate: float = 0.0
    batch_validation_error: str | None = None
    noisy_judges: Mapping[str, NoisyJudge] = dataclasses.field(default_factory=dict)
    pairwise_judges: Mapping[str, PairwiseJudge] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        judges: Any = self.noisy_judges
        if isinstance(judges, str):
            judges = json.loads(judges)
        if not isinstance(judges, Mapping):
            raise ValueError("noisy_judges must map model names to NoisyJudge fields")
        coerced = {str(model): NoisyJudge.coerce(j) for model, j in judges.items()}
        object.__setattr__(self, "noisy_judges", coerced)
        pairwise: Any = self.pairwise_judges
        if isinstance(pairwise, str):
            pairwise = json.loads(pairwise)
        if not isinstance(pairwise, Mapping):
            raise ValueError("pairwise_judges must map model names to PairwiseJudge fields")
        object.__setattr__(
            self,
            "pairwise_judges",
            {str(model): PairwiseJudge.coerce(j) for model, j in pairwise.items()},
        )
        if self.latency < 0 or (self.latency_max is not None and self.latency_max < self.latency):
            raise ValueError("need 0 <= latency <= latency_max")
        if self.rpm is not None and self.rpm <= 0:
            raise ValueError("rpm must be positive (or None for no limit)")
        if self.rpm_window is not None and self.rpm_window <= 0:
            raise ValueError("rpm_window must be positive seconds (or None for a token bucket)")
        if self.retry_after not in _RETRY_AFTER_STYLES:
            raise ValueError(f"retry_after must be one of {_RETRY_AFTER_STYLES}")
        rates = [getattr(self, name) for name in _RATES]
        if any(not 0.0 <= r <= 1.0 for r in rates) or sum(rates) > 1.0 + 1e-9:
            raise ValueError(f"each of {', '.join(_RATES)} must be in [0, 1], summing to <= 1")
        if self.prompt_cache not in _CACHE_STYLES:
            raise ValueError(f"prompt_cache must be one of {_CACHE_STYLES}")
        if self.echo_headers not in _ECHO_MODES:
            raise ValueError(f"echo_headers must be one of {_ECHO_MODES}")
        if self.hang_seconds < 0 or self.trickle_seconds < 0:
            raise ValueError("hang_seconds and trickle_seconds must be >= 0")
        batch_rates = (self.batch_failed_rate, self.batch_expired_rate)
        if (
            self.batch_seconds < 0
            or any(not 0 <= r <= 1 for r in batch_rates)
            or sum(batch_rates) > 1
        ):
            raise ValueError("need batch_seconds >= 0 and batch rates in [0, 1] summing to <= 1")
        if self.embedding_dimensions < 1 or self.max_recorded < 0:
            raise ValueError("embedding_dimensions must be >= 1 and max_recorded >= 0")

    @functools.cached_property
    def any_rate(self) -> bool:
        """Whether any random fault can fire (saves an RNG draw per request otherwise)."""
        return any(getattr(self, name) for name in _RATES)

    def noisy_judge(self, model: Any) -> NoisyJudge | None:
        """The noisy judge answering as ``model`` (its own entry, else ``"*"``), if any."""
        judges = self.noisy_judges
        if not judges:
            return None
        return judges.get(str(model)) or judges.get("*")

    def pairwise_judge(self, model: Any) -> PairwiseJudge:
        """The pairwise judge answering as ``model`` (its own entry, else ``"*"``, else one
        without position bias)."""
        judges = self.pairwise_judges
        return judges.get(str(model)) or judges.get("*") or _UNBIASED

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return dataclasses.asdict(self)
