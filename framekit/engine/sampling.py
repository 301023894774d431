"""Self-consistency: one request asked several times, its answers put to a vote.

A judge that reports no token logprobs (Anthropic's models, say) can still say how sure
it is: asked ``samples=k`` times at a temperature above 0, the label most of its answers
give stands, and the share of answers that give it is the row's confidence (Wang et al.
2023, "Self-Consistency Improves Chain of Thought Reasoning in Language Models", applied
to a judge's verdict). Every sample is a request of its own, cached under the request's
key plus its index, so an interrupted run keeps the samples it has and a re-run asks for
none of them again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from framekit._results import Outcome
from framekit.judges.request import ChatRequest


def sample_key(key: str, index: int) -> str:
    """The cache key of sample ``index`` of the request cached under ``key``.

    Examples
    --------
    >>> sample_key("chat:ab12", 2)
    'chat:ab12:sample2'
    """
    return f"{key}:sample{index}"


def vote(request: ChatRequest, samples: Sequence[Outcome]) -> Outcome:
    """The outcome of a request from the outcomes of its samples.

    The majority label stands (a tie goes to the label answered first); the answer is the
    first sample that gave it, and the labels' probabilities are their shares of the
    answered samples (so the confidence is the agreement). Samples that failed take no part;
    when every one failed, the first error is the request's. Tokens and cost add up; the
    outcome is cached only when every sample was.

    Examples
    --------
    >>> from framekit._results import Outcome
    >>> request = ChatRequest([], "r", {}, choices=("yes", "no"))
    >>> votes = [Outcome({"label": lb}, None) for lb in ("yes", "no", "yes", "yes")]
    >>> outcome = vote(request, votes)
    >>> outcome.answer, outcome.probabilities
    ({'label': 'yes'}, {'yes': 0.75, 'no': 0.25})
    """
    costs = [s.cost_usd for s in samples if s.cost_usd is not None]
    total = replace(
        samples[0],
        tokens=sum(s.tokens for s in samples),
        cost_usd=sum(costs) if costs else None,
        latency_s=max((s.latency_s or 0.0 for s in samples), default=0.0),
        cached=all(s.cached for s in samples),
        probabilities=None,
    )
    answered = [s.answer for s in samples if s.answer is not None]
    if not answered:
        error = next((s.error for s in samples if s.error), None) or "no answer"
        suffix = f" (all {len(samples)} samples failed)" if len(samples) > 1 else ""
        return replace(total, answer=None, error=error + suffix)
    field = request.label_field
    if not field or not request.choices:
        # Nothing to vote on (a free-text answer): the first answer stands, unweighed.
        return replace(total, answer=answered[0], error=None)
    labels = [str(answer.get(field)) for answer in answered]
    counts = Counter(labels)
    winner = max(counts, key=lambda label: (counts[label], -labels.index(label)))
    shares = {label: counts.get(label, 0) / len(labels) for label in request.choices}
    return replace(total, answer=answered[labels.index(winner)], error=None, probabilities=shares)
