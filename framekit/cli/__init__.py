"""The ``framekit`` command (``python -m framekit`` is the same).

- ``main``: the parser, the exit codes and the messages in the command line's words;
- ``options``: the flags the scoring commands share (judge, mapping, cache, evaluators);
- ``evaluate``: ``framekit evaluate`` (and its dry run); ``traces``: ``--traces`` and
  ``export-annotations``; ``report``: ``report`` and ``compare``; ``gate``: ``gate``;
  ``batches``: ``batches`` (and ``batches cancel ID``).
"""

from framekit.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
