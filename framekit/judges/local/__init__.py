"""The offline judge: embedding-similarity proxies computed on the CPU, no API at all.

The whole offline judge lives in this package:

- ``LocalJudge`` (here): the judge object; it only embeds texts, off the event loop.
- ``embedder``: all-MiniLM-L6-v2 as int8 ONNX on onnxruntime, checksum-pinned.
- ``methods``: similarities, sentence splitting, and the cut points of ``calibration.json``
  (written by ``scripts/calibrate_local_judge.py``).
- ``likelihood``: the ``lm`` extra's scorer (SmolLM2-135M on llama.cpp), which the judge
  uses instead of embeddings for the evaluators that have likelihood hooks, when the
  extra is installed.

Which texts an evaluator compares and how a similarity becomes its label is the
evaluator's knowledge (``local_texts`` / ``local_verdict``, in
``framekit/evaluators/_local.py``): evaluators sit above judges, so that part stays there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from framekit._errors import InputError

if TYPE_CHECKING:
    from framekit.judges.local.likelihood import Likelihood, LikelihoodInput


class LocalJudge:
    """The offline judge (``judge="local"``): all-MiniLM-L6-v2 on onnxruntime.

    Scores are similarity proxies calibrated on WikiQA, not LLM judgements: use them as a
    free first pass, or when no API is reachable. Each explanation names the numbers used.

    Groundedness, ContextRecall and Coherence are read by the likelihood scorer instead
    when the ``lm`` extra is installed (the mean token log-probability of the text given
    its documents or request, under SmolLM2-135M-Instruct: measured closer to expert
    ratings on SummEval, and about 1 text/s on 2 cores against the proxies' ~20).
    Coherence's response without a request stays on the proxy, measured closer to the
    experts there.

    Parameters
    ----------
    embedder
        The embedding model (default: all-MiniLM-L6-v2, loaded on first use).
    likelihood
        ``None`` (default): the likelihood scorer where an evaluator has one and the
        extra is installed, the embedding proxies otherwise. ``True``: require it (a run
        without the extra raises :class:`~framekit.MissingDependency` with the install
        command before any call). ``False``: always the proxies (faster).
    relevant_share
        The share of relevant pairs you expect in your data, in (0, 1). The relevance
        evaluators' confidences (the probability that a person agrees with the pass or
        fail) were fitted on WikiQA, where about 5 % of the pairs are relevant; data where
        relevant pairs are commoner make a fail less certain and a pass more. Given a
        share, each confidence is moved to it by Bayes' rule
        (:func:`~framekit.judges.local.confidence.moved_to_prior`); scores and labels do
        not change. Default ``None``: WikiQA's share.

    Examples
    --------
    >>> judge = LocalJudge()
    >>> judge.model
    'local/all-MiniLM-L6-v2'
    >>> LocalJudge(likelihood=False)
    LocalJudge(likelihood=False)
    >>> LocalJudge(relevant_share=0.3)
    LocalJudge(relevant_share=0.3)
    """

    kind = "local"
    model = "local/all-MiniLM-L6-v2"
    # Texts per call into the embedder (which batches by length inside); one call per
    # batch also bounds how long a cancelled run waits for its worker thread.
    batch_size = 256
    secrets: list[str] = []

    def __init__(
        self,
        embedder: Any | None = None,
        *,
        likelihood: bool | None = None,
        relevant_share: float | None = None,
    ) -> None:
        if relevant_share is not None and (
            isinstance(relevant_share, bool)
            or not isinstance(relevant_share, (int, float))
            or not 0.0 < relevant_share < 1.0
        ):
            raise InputError(
                f"relevant_share must be a share between 0 and 1 (e.g. 0.3), got {relevant_share!r}"
            )
        self._embedder = embedder
        self.likelihood = likelihood
        self.relevant_share = None if relevant_share is None else float(relevant_share)
        self._installed: bool | None = None  # whether the lm extra is, asked once

    @property
    def embedder(self) -> Any:
        if self._embedder is None:
            from framekit.judges.local.embedder import LocalEmbedder

            self._embedder = LocalEmbedder.default()
        return self._embedder

    def with_threads(self, threads: int) -> LocalJudge:
        """This judge with its default model on ``threads`` onnxruntime threads (a judge
        given an embedder of its own keeps it)."""
        if self._embedder is not None:
            return self
        from framekit.judges.local.embedder import LocalEmbedder

        return LocalJudge(
            LocalEmbedder(threads=threads),
            likelihood=self.likelihood,
            relevant_share=self.relevant_share,
        )

    @property
    def model_id(self) -> str:
        """Model name plus the pinned checksum: part of every embedding cache key."""
        # A constant from the pinned checksum: a fully cached run never loads the model.
        from framekit.judges.local.embedder import MODEL_ID

        return MODEL_ID

    async def prepare(self) -> None:
        """Load the model now (raises :class:`~framekit.LocalModelError` when it is
        missing): before a run pays for answers that will need it."""
        await asyncio.to_thread(lambda: self.embedder)

    async def embed(self, texts: list[str]) -> np.ndarray:
        # onnxruntime releases the GIL, so a worker thread keeps the event loop free.
        return await asyncio.to_thread(self.embedder.embed, texts)

    def classify(self, exc: BaseException) -> None:
        """A failure on the CPU is no call that may pass on a retry: never retried."""
        return None

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.model_id}

    # -- what the engine asks of every kind of judge ------------------------------------
    #: Its verdicts follow the embeddings it makes (unless it reads likelihoods).
    embeds_locally = True

    @property
    def chat_endpoint(self) -> None:
        """The LLM endpoint its requests go to: none (it scores on the CPU)."""
        return None

    @property
    def offline(self) -> LocalJudge:
        """The offline judge it is: itself."""
        return self

    @property
    def cascade(self) -> None:
        """The cascade it is: none."""
        return None

    def stages(self) -> tuple[LocalJudge]:
        """The judges asked in turn, cheapest first: this one."""
        return (self,)

    @property
    def confidence_method(self) -> str:
        """How it gives a row's confidence, as the run record says it: its calibrated map
        (moved to the relevant share the user expects, where one is given)."""
        share = self.relevant_share
        return "calibrated offline" + (f" (relevant share {share:g})" if share else "")

    # -- the likelihood scorer (framekit[lm]) -------------------------------------------
    def scores_likelihood(self, evaluator: Any) -> bool:
        """Whether this judge reads ``evaluator`` with the likelihood scorer: it has the
        hooks, and ``likelihood`` is ``True``, or ``None`` with the extra installed."""
        from framekit.judges.local import likelihood as lm

        if self.likelihood is False or not lm.uses_likelihood(evaluator):
            return False
        if self.likelihood:
            return True
        if self._installed is None:
            self._installed = lm.likelihood_available()
        return self._installed

    def method(self, evaluator: Any) -> str:
        """What scores ``evaluator`` offline, as the run record says it."""
        proxy = f"embedding proxy ({self.model_id})"
        if self.scores_likelihood(evaluator):
            from framekit.judges.local.likelihood import MODEL_ID

            # An evaluator that keeps some records from the scorer says which it reads.
            scope = getattr(evaluator, "local_likelihood_scope", None)
            if scope:
                return f"likelihood ({MODEL_ID}) for {scope}; {proxy} for the others"
            return f"likelihood ({MODEL_ID})"
        return proxy

    async def prepare_likelihood(self) -> None:
        """Load the likelihood scorer now (raises :class:`~framekit.MissingDependency`
        without the extra): before a run pays for answers."""
        from framekit.judges.local.likelihood import LikelihoodScorer

        await asyncio.to_thread(LikelihoodScorer.default)

    async def score_likelihood(self, inputs: Sequence[LikelihoodInput]) -> list[Likelihood]:
        """The likelihood of each input (llama.cpp, off the event loop; records sharing a
        prompt share its evaluation)."""
        from framekit.judges.local.likelihood import LikelihoodScorer

        def score() -> list[Likelihood]:
            return LikelihoodScorer.default().score(inputs)

        return await asyncio.to_thread(score)

    def __repr__(self) -> str:
        given = [f"likelihood={self.likelihood}"] if self.likelihood is not None else []
        if self.relevant_share is not None:
            given.append(f"relevant_share={self.relevant_share:g}")
        return f"LocalJudge({', '.join(given)})"
