"""Moved to :mod:`framekit.judges.faults` (each transport classifies its own failures);
these names stay importable from here for code written against the old place."""

from framekit.judges.faults import Fault, FaultRaised, parse_retry_after, redact
from framekit.judges.litellm_faults import classify

__all__ = ["Fault", "FaultRaised", "classify", "parse_retry_after", "redact"]
