"""``evaluate_dataset``: score a Ray Dataset on a pool of actors, one rate limit for all."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import ray
import ray.data

from framekit._errors import InputError
from framekit.engine.budget import check_budget, require_prices
from framekit.engine.cache import Cache, default_cache_dir
from framekit.engine.mapping import MappingValue
from framekit.evaluators.base import Evaluator, check_evaluators
from framekit.judges.cascade import Cascade
from framekit.judges.judge import Judge
from framekit.judges.local import LocalJudge
from framekit.judges.providers import FRAMEKIT_KEY_VAR
from framekit.judges.resolve import JudgeLike, resolve_judge
from framekit.ray._budget import budget_actor
from framekit.ray._limiter import shared_limiter
from framekit.ray._scorer import BlockScorer, RunSpec

#: Rows per block handed to a worker. Requests are deduplicated within a block, so larger
#: blocks dedup more; smaller ones spread better over workers and lose less when killed.
DEFAULT_BATCH_ROWS = 1024
#: Workers for an API judge: the limit is the endpoint's, not the cluster's CPUs.
DEFAULT_API_WORKERS = 2
#: CPUs reserved per worker. An API judge mostly waits on the network (litellm's ~4 ms of
#: CPU per call is the rest), so its workers leave CPUs for Ray's read and write tasks;
#: the offline judge is CPU-bound (onnxruntime) and takes a whole one.
API_WORKER_CPUS = 0.25
LOCAL_WORKER_CPUS = 1.0


def ensure_ray(address: str | None = None) -> None:
    """Connect to Ray: ``address`` (e.g. ``"auto"``, ``"ray://head:10001"``), or start a
    local instance when ``address`` is ``None`` and Ray is not yet initialised."""
    if ray.is_initialized():
        return
    ray.init(address=address, include_dashboard=False, log_to_driver=False)


def cache_spec(cache: Cache | str | os.PathLike[str] | bool | None) -> str | bool:
    """The cache as every worker opens it: a directory path, or ``False`` for none.

    Resolved on the driver, so ``cache=None`` means the driver's default cache directory
    (``$FRAMEKIT_CACHE_DIR`` or the user cache dir) on every node.
    """
    if cache is False:
        return False
    if isinstance(cache, Cache):
        return str(cache.path.absolute()) if cache.enabled else False
    if cache is None or cache is True:
        return str(default_cache_dir())
    return str(os.path.abspath(cache))


def run_spec(
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None,
    judge: JudgeLike | None,
    cache: Cache | str | os.PathLike[str] | bool | None,
    details: bool,
    overwrite: bool,
    shared_limit: bool,
    max_cost_usd: float | None = None,
) -> RunSpec:
    """Check and resolve the run's settings on the driver (errors before any worker starts)."""
    evs = check_evaluators(evaluators)
    resolved = resolve_judge(judge)
    limit = check_budget(max_cost_usd)
    if limit is not None:
        require_prices([resolved, *(resolve_judge(ev.judge) for ev in evs if ev.judge)])
    limiter = None
    key_from_env = False
    resolved_endpoint = resolved.chat_endpoint
    if resolved_endpoint is not None:
        resolved = resolved_endpoint
        if shared_limit:
            limiter = shared_limiter(resolved.model, resolved.api_base, resolved.rpm, resolved.tpm)
        # The spec travels through Ray's object store (which may spill to disk). A judge
        # carries only a key it was given; one it reads from the environment is read
        # from each worker's own, which must then hold it.
        key, source = resolved.endpoint.credentials.own()
        key_from_env = bool(key) and source == f"${FRAMEKIT_KEY_VAR}"
    return RunSpec(
        evs, mapping, resolved, cache_spec(cache), details, overwrite, limiter, key_from_env,
        budget_actor(limit), limit,
    )  # fmt: skip


def pool_settings(
    judge: Judge | LocalJudge | Cascade, workers: int | None, num_cpus: float | None
) -> tuple[int, float]:
    """Workers and CPUs per worker, defaulted from the judge and the cluster."""
    local = judge.offline is not None
    if workers is None:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        workers = max(1, cpus) if local else DEFAULT_API_WORKERS
    if workers < 1:
        raise InputError(f"workers must be >= 1, got {workers}")
    if num_cpus is None:
        num_cpus = LOCAL_WORKER_CPUS if local else API_WORKER_CPUS
    return workers, num_cpus


def evaluate_dataset(
    ds: ray.data.Dataset,
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None = None,
    *,
    judge: JudgeLike | None = None,
    cache: Cache | str | os.PathLike[str] | bool | None = None,
    details: bool = False,
    overwrite: bool = False,
    workers: int | None = None,
    num_cpus: float | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    shared_limit: bool = True,
    max_cost_usd: float | None = None,
) -> ray.data.Dataset:
    """Score a Ray Dataset with LLM-as-judge evaluators on a pool of Ray actors.

    Lazy, like every Ray Data transform: nothing runs until the result is consumed
    (``write_parquet``, ``iter_batches``, ``materialize``...). Each worker runs
    :func:`framekit.evaluate_dataframe` on its blocks (Arrow in, Arrow out: no pandas).

    Parameters
    ----------
    ds
        The rows to score, e.g. ``ray.data.read_parquet("s3://bucket/traces/")``. Ray
        hands each worker whole blocks: a dataset of one block (``from_arrow(table)``)
        keeps one worker busy; ``ds.repartition(n)`` spreads it.
    evaluators, mapping, details, overwrite
        As for :func:`framekit.evaluate_dataframe`. Errors are recorded per row
        (``on_error="record"``).
    judge
        A model string, a :class:`framekit.Judge` (its ``concurrency`` is *per worker*;
        its ``rpm`` and ``tpm`` are for the whole cluster), ``"local"`` or ``None``.
    cache
        A directory every worker opens. On one machine or a shared filesystem it is one
        cache for all workers (diskcache is safe across processes); otherwise each node
        keeps its own cache at that path. ``None``: the driver's default cache directory.
    workers
        Actors in the pool. Default: 2 for an API judge, the cluster's CPUs for the
        offline judge.
    num_cpus
        CPUs reserved per worker. Default 0.25 for an API judge, 1 for the offline judge.
    batch_rows
        Rows a worker scores at once (requests are deduplicated within them; the cache
        catches repeats across batches).
    shared_limit
        Pace every worker through one named limiter actor holding the judge's RPM, TPM
        and 429 pause (default). ``False`` gives each worker its own limiter with the
        full limits: N workers then send N times the rate.
    max_cost_usd
        One budget in US dollars for every worker (an actor holds it), as for
        :func:`framekit.evaluate_dataframe`: rows left carry an error saying so.

    Returns
    -------
    ray.data.Dataset
        Every input column, then the result columns of :func:`framekit.evaluate_dataframe`.
        Row order follows Ray's execution (set ``DataContext.execution_options.
        preserve_order`` to keep the input order).

    Examples
    --------
    >>> import ray, framekit as fk
    >>> import framekit.ray as fkray
    >>> from framekit.evaluators import RetrievalRelevance
    >>> ds = ray.data.read_parquet("s3://bucket/traces/")  # doctest: +SKIP
    >>> scored = fkray.evaluate_dataset(
    ...     ds, [RetrievalRelevance()], {"input": "question", "context": "docs"},
    ...     judge=fk.Judge("openai/gpt-4o-mini", rpm=3000, concurrency=32),
    ...     cache="/shared/framekit-cache",
    ... )  # doctest: +SKIP
    >>> scored.write_parquet("s3://bucket/scored/")  # doctest: +SKIP
    """
    if batch_rows < 1:
        raise InputError(f"batch_rows must be >= 1, got {batch_rows}")
    ensure_ray()
    spec = run_spec(
        evaluators, mapping, judge, cache, details, overwrite, shared_limit, max_cost_usd
    )
    _check_columns(ds, spec)
    size, cpus = pool_settings(spec.judge, workers, num_cpus)
    return ds.map_batches(
        BlockScorer,
        fn_constructor_args=(spec,),
        batch_size=batch_rows,
        batch_format="pyarrow",
        zero_copy_batch=True,
        compute=ray.data.ActorPoolStrategy(size=size),
        num_cpus=cpus,
    )


def _check_columns(ds: ray.data.Dataset, spec: RunSpec) -> None:
    """A bad mapping, a missing field or a result-column clash is an error here, on the
    driver, before any worker starts (when the dataset knows its schema without running)."""
    import polars as pl
    import pyarrow as pa

    from framekit.io import validate_inputs

    schema = ds.schema(fetch_if_missing=False)
    arrow = getattr(schema, "base_schema", None)
    if isinstance(arrow, pa.Schema):
        empty = pl.from_arrow(arrow.empty_table())
        assert isinstance(empty, pl.DataFrame)
        validate_inputs(empty.schema, spec.evaluators, spec.mapping, spec.overwrite, spec.details)
