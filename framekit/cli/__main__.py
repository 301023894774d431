"""``python -m framekit.cli``: the ``framekit`` command."""

from framekit.cli.main import main

raise SystemExit(main())
