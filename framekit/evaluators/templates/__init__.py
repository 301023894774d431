"""Prompt templates kept as data (TOML), one file per evaluator, one table per version.

A version may be *laid out* for the provider's prompt cache (``layout = "context"``, see
``layouts.toml``): it takes its rubric and labels from ``base`` (another version of the
same file, word for word but for the paragraph on the data delimiters, which the
layout's system message states) and is sent as the layout orders it, the data shared by
the evaluators of one row first.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from importlib import resources

from framekit._errors import InputError
from framekit.judges.shared_prefix import SHARED_UNTIL

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
    if "layout" in spec:
        spec = _laid_out(name, table, spec)
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


def shared_until(spec: TemplateSpec) -> tuple[str, ...]:
    """The lines that end the part a laid-out version's requests share with other
    evaluators of the row (``()``: a version without a layout)."""
    lines = spec.extra.get(SHARED_UNTIL, ())
    return tuple(str(line) for line in lines) if isinstance(lines, (list, tuple)) else ()


#: How a rubric's paragraph on the data delimiters names them.
_DELIMITER_RULE = "[BEGIN DATA: ...]"
#: The file of the layouts (not an evaluator's template).
LAYOUTS = "layouts"


def _laid_out(
    name: str, table: dict[str, dict[str, object]], spec: dict[str, object]
) -> dict[str, object]:
    """A laid-out version as a plain one: its base's rubric and labels, the layout's
    system text, and a user message of the shared data, the rubric, then its own text."""
    layout = str(spec.pop("layout"))
    layouts = _load_file(LAYOUTS)
    base_name = str(spec.pop("base", ""))
    if layout not in layouts or base_name not in table:
        raise InputError(
            f"{name}: the template names an unknown layout {layout!r} or base {base_name!r}"
        )
    shape, base = layouts[layout], table[base_name]
    # The base's rubric word for word, but for its paragraph on the data delimiters: the
    # layout's system message states that rule, and the user message then holds no
    # delimiter but those around the data.
    paragraphs = str(base["system"]).strip().split("\n\n")
    rubric = "\n\n".join(p for p in paragraphs if _DELIMITER_RULE not in p)
    laid = {k: v for k, v in base.items() if k not in ("system", "user", "user_without_input")}
    laid.update(spec)

    def user(data: str, own: object) -> str:
        return "\n\n".join((str(shape[data]).strip(), rubric, str(own).strip()))

    laid["system"] = str(shape["system"]).strip()
    laid["user"] = user("data", spec["user"])
    if "user_without_input" in spec:
        laid["user_without_input"] = user("data_without_input", spec["user_without_input"])
    laid["layout"] = layout
    laid[SHARED_UNTIL] = list(shape[SHARED_UNTIL])  # type: ignore[call-overload]
    return laid
