"""``framekit batches``: the provider batches recorded in a cache, and cancelling one.

The list comes from the manifests beside the cache (see
:mod:`framekit.engine.batch_manifest`); unfinished batches are refreshed from their
provider unless ``--offline``. The API key comes from ``FRAMEKIT_API_KEY`` (or the
provider's own variable, or ``--api-key-env``), never from a flag, and goes only to the
endpoint the user gives (``--api-base``, else ``FRAMEKIT_API_BASE``, else the provider's
own), never to one a manifest names: whoever can write the cache can write a manifest.
A batch recorded for another endpoint is shown as recorded and cannot be cancelled here.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

from framekit._errors import FaultRaised, InputError, JudgeError
from framekit.cli.options import command
from framekit.engine.batch_manifest import printable


def add_parser(sub: Any) -> None:
    """Add ``batches`` (and ``batches cancel ID``) to the ``framekit`` subcommands."""
    from framekit.judges.providers import FRAMEKIT_BASE_VAR

    bat = command(
        sub,
        "batches",
        help="list provider batches submitted by --batch runs, or cancel one",
        description="List the provider batches recorded in the cache (state, request "
        "counts, age, cost of the answers collected so far), or `cancel ID` one. "
        "A run interrupted while its batch was in flight picks it up when run again.",
    )
    bat.add_argument("action", nargs="?", choices=("list", "cancel"), default="list")
    bat.add_argument("batch_id", nargs="?", metavar="ID", help="batch to cancel")
    bat.add_argument("--cache", metavar="DIR", help="cache directory (default: the user cache)")
    bat.add_argument("--api-key-env", metavar="NAME", help="variable holding the API key")
    bat.add_argument(
        "--api-base",
        metavar="URL",
        default=os.environ.get(FRAMEKIT_BASE_VAR) or None,
        help="endpoint the batches were sent to (default: $FRAMEKIT_API_BASE, else the "
        "provider's own); batches recorded for another endpoint are only shown as recorded",
    )
    bat.add_argument(
        "--offline", action="store_true", help="show the recorded states; ask no provider"
    )
    bat.set_defaults(handler=run)


def _store(args: argparse.Namespace) -> Any:
    from framekit.engine.batch_manifest import ManifestStore
    from framekit.engine.cache import default_cache_dir

    def warn(text: str) -> None:
        print(f"framekit: warning: {text}", file=sys.stderr)

    return ManifestStore(Path(args.cache or default_cache_dir()) / "batches", warn)


def _client(manifest: Any, args: argparse.Namespace) -> Any:
    """A client for the endpoint the user gave, or ``None`` when ``manifest`` was
    recorded for another one (the key is never sent where the file says)."""
    from framekit.engine.batch import recorded_endpoint
    from framekit.judges.batch import make_client

    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    client = make_client(manifest.provider, args.api_base, key, manifest.model)
    return client if recorded_endpoint(client.api_base) == manifest.endpoint else None


def run(args: argparse.Namespace) -> int:
    store = _store(args)
    if args.action == "cancel":
        if not args.batch_id:
            raise InputError("give the batch to cancel: framekit batches cancel ID")
        manifest = store.find(args.batch_id)
        if manifest is None or manifest.batch_id is None:
            raise InputError(f"no submitted batch {args.batch_id!r} in {store.root}")
        client = _client(manifest, args)
        if client is None:
            raise InputError(
                f"batch {manifest.batch_id} was recorded for {manifest.endpoint}, not the "
                "endpoint given (--api-base, else FRAMEKIT_API_BASE, else the provider's "
                "own); nothing was sent"
            )
        status = asyncio.run(_call(client, "cancel", manifest.batch_id))
        manifest.provider_state = status.state
        store.save(manifest)
        print(f"batch {manifest.batch_id}: {status.state}")
        return 0
    manifests = list(store.all())
    if not manifests:
        print(f"no batches recorded in {store.root}")
        return 0
    print(
        f"{'batch':<24} {'provider':<9} {'state':<12} {'requests':>8} {'done':>7} "
        f"{'failed':>6} {'age':>7} {'cost':>10}"
    )
    elsewhere = 0
    for m in sorted(manifests, key=lambda m: m.created):
        state = m.provider_state or m.state
        client = None
        if m.state == "submitted" and m.batch_id and not args.offline:
            client = _client(m, args)
            elsewhere += client is None
        if client is not None and m.batch_id:
            try:
                status = asyncio.run(_call(client, "retrieve", m.batch_id))
                state, m.completed, m.failed = status.state, status.completed, status.failed
                m.provider_state = state
                store.save(m)
            except (JudgeError, OSError) as exc:
                print(f"framekit: could not refresh {m.batch_id}: {exc}", file=sys.stderr)
        if m.state in ("collected", "failed"):
            state = m.state
        print(
            f"{m.batch_id or m.local_id:<24} {m.provider:<9} {printable(state):<12} "
            f"{m.requests:>8} {m.completed:>7} {m.failed:>6} {_age(m.created):>7} "
            f"{f'${m.cost_usd:.4f}':>10}"
        )
    if elsewhere:
        print(
            f"framekit: {elsewhere} unfinished batch(es) recorded for another endpoint are "
            "shown as recorded, not asked about: give that endpoint with --api-base (or "
            "FRAMEKIT_API_BASE) to refresh them",
            file=sys.stderr,
        )
    return 0


async def _call(client: Any, method: str, batch_id: str) -> Any:
    from framekit.judges.faults import raise_for_run

    try:
        return await getattr(client, method)(batch_id)
    except FaultRaised as exc:
        raise_for_run(exc.fault)  # rejected credentials: exit 2, with the fix
        raise
    finally:
        await client.close()


def _age(created: float) -> str:
    seconds = max(0.0, time.time() - created)
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    if seconds < 86400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"
