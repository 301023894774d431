"""Regenerate ``framekit/judges/litellm/routes.py`` from the installed litellm.

framekit checks a judge's model string when the judge is built, without importing
litellm (seconds) and without a network: is its provider prefix one litellm routes, or
does its ``api_base`` belong to a hosted provider litellm recognises by address? Those two
lists live in litellm's code, so they are copied here, with the litellm version they came
from. With a newer litellm installed, framekit does not refuse a prefix missing from the
copy (litellm itself answers at the first call); ``tests/test_fail_fast.py`` compares
the copy with the installed litellm when the versions match.

Run ``python scripts/make_litellm_routes.py`` after upgrading litellm.
"""

from __future__ import annotations

import json
import os
from importlib.metadata import version
from pathlib import Path
from urllib.parse import urlparse

OUT = Path(__file__).resolve().parent.parent / "framekit" / "judges" / "litellm" / "routes.py"


def routes() -> tuple[list[str], list[str]]:
    """litellm's provider prefixes and the hosts of its hosted OpenAI-compatible APIs."""
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    import litellm
    from litellm.llms.openai_like.json_loader import JSONProviderRegistry

    providers = {str(getattr(p, "value", p)) for p in litellm.provider_list}
    providers |= set(JSONProviderRegistry.list_providers())
    hosts = set()
    for endpoint in litellm.openai_compatible_endpoints:
        parsed = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
        if parsed.hostname:
            hosts.add(parsed.hostname.lower())
    return sorted(providers), sorted(hosts)


def render(providers: list[str], hosts: list[str], litellm_version: str) -> str:
    def block(values: list[str]) -> str:
        return "".join(f"        {json.dumps(v)},\n" for v in values)

    return (
        f'"""litellm {litellm_version}\'s routes, copied by scripts/make_litellm_routes.py '
        "(do not edit).\n\n"
        "``ROUTED_PREFIXES``: the provider prefixes litellm routes (``litellm.provider_list`` and "
        "its\nJSON-configured providers). ``ENDPOINT_HOSTS``: hosts of the hosted "
        "OpenAI-compatible APIs\nlitellm recognises by ``api_base`` alone, for a model "
        'named without a prefix.\n"""\n\n'
        f"LITELLM_VERSION = {json.dumps(litellm_version)}\n\n"
        f"ROUTED_PREFIXES = frozenset(\n    {{\n{block(providers)}    }}\n)\n\n"
        f"ENDPOINT_HOSTS = frozenset(\n    {{\n{block(hosts)}    }}\n)\n"
    )


def main() -> None:
    providers, hosts = routes()
    OUT.write_text(render(providers, hosts, version("litellm")))
    print(f"wrote {OUT}: {len(providers)} providers, {len(hosts)} endpoint hosts")


if __name__ == "__main__":
    main()
