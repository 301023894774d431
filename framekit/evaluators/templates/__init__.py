"""Prompt templates kept as data (TOML), one file per evaluator, one table per version."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from importlib import resources

from framekit._errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: The template version a built-in evaluator uses unless ``version=`` says otherwise: the
#: one that asks its source document's question (each template file names its source).
DEFAULT_VERSION = "v1"


@dataclass(frozen=True)
class TemplateSpec:
    """One version of an evaluator's prompt: instructions, request text and label scores."""

    name: str
    version: str
    description: str
    system: str
    user: str
    choices: dict[str, float]
    extra: dict[str, object]


@cache
def _load_file(name: str) -> dict[str, dict[str, object]]:
    text = resources.files(__package__).joinpath(f"{name}.toml").read_text("utf-8")
    return tomllib.loads(text)


def load_template(name: str, version: str) -> TemplateSpec:
    """The template ``version`` of evaluator ``name``; an unknown version lists the known."""
    table = _load_file(name)
    if version not in table:
        known = ", ".join(sorted(table))
        raise InputError(f"{name} has no template version {version!r}; known versions: {known}")
    spec = dict(table[version])
    choices = {str(k): float(v) for k, v in dict(spec.pop("choices", {})).items()}  # type: ignore[call-overload]
    return TemplateSpec(
        name=name,
        version=version,
        description=str(spec.pop("description", "")),
        system=str(spec.pop("system", "")).strip(),
        user=str(spec.pop("user", "")).strip(),
        choices=choices,
        extra=spec,
    )
