"""framekit on Ray Data: score tables past one machine, under one shared rate limit.

>>> import framekit.ray as fkray
>>> scored = fkray.evaluate_dataset(ds, evaluators, mapping, judge=judge)  # doctest: +SKIP
>>> run = fkray.evaluate_parquet("in/*.parquet", "out.parquet", evaluators, mapping,
...                              judge=judge, workers=2)  # doctest: +SKIP

Needs the ``framekit[ray]`` extra; ``import framekit`` never imports Ray.

- ``_dataset``: :func:`evaluate_dataset` (a Ray Dataset in, a Ray Dataset out), defaults.
- ``_scorer``: what each worker (a ``map_batches`` actor) runs on a block or a slice.
- ``_limiter``: the cluster's rate-limiter actor and the worker-side proxy the engine's
  executor uses in place of its own limiter.
- ``_parquet``: ``evaluate_parquet(..., engine="ray")``, resumable like the local one.
"""

from framekit._dependencies import import_optional

import_optional("ray.data", extra="ray", purpose="framekit.ray")

from framekit.ray._dataset import ensure_ray, evaluate_dataset  # noqa: E402
from framekit.ray._limiter import RemoteLimiter, limiter_name, shared_limiter  # noqa: E402
from framekit.ray._parquet import evaluate_parquet  # noqa: E402

__all__ = [
    "RemoteLimiter",
    "ensure_ray",
    "evaluate_dataset",
    "evaluate_parquet",
    "limiter_name",
    "shared_limiter",
]
