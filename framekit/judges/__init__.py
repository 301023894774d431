"""Judges: :class:`Judge` (one endpoint, over the http or litellm transport) and the
offline :class:`LocalJudge`.

- ``judge``: :class:`Judge`, and :func:`resolve_judge` (what ``judge=`` becomes);
- ``cascade``: :class:`Cascade`, judges tried in order on the rows the last was unsure of;
- ``endpoint``, ``credentials``, ``providers``: the immutable values a judge hands its
  transport, where its key is read from, and the one table of providers;
- ``request``: what an evaluator asks (:class:`ChatRequest`) and how a reply is read;
- ``transport``: the boundary the engine uses; ``faults``: what a failed call means;
- ``http``, ``litellm/``: the two transports; ``batch/``: provider batch APIs;
  ``pricing``: list prices; ``local/``: the offline judge.
"""

from framekit.judges.cascade import Cascade
from framekit.judges.endpoint import Decoding, Endpoint, Limits
from framekit.judges.faults import Fault
from framekit.judges.judge import Judge
from framekit.judges.local import LocalJudge
from framekit.judges.request import ChatRequest
from framekit.judges.resolve import JudgeLike, resolve_judge
from framekit.judges.transport import RawReply, Transport

__all__ = [
    "Cascade",
    "ChatRequest",
    "Decoding",
    "Endpoint",
    "Fault",
    "Judge",
    "JudgeLike",
    "Limits",
    "LocalJudge",
    "RawReply",
    "Transport",
    "resolve_judge",
]
