"""``python -m framekit``: the same as the ``framekit`` command."""

from framekit.cli import main

raise SystemExit(main())
