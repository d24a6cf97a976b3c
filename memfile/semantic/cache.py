"""The vector cache: one vector per embedded text, under `<vault>/.memfile/`, never committed (derived data).

One SQLite file per mind and model, `.memfile/vectors-<mind>-<model_id>.sqlite`: `meta(key, value)`
(schema, model_id, dimension, recipe: a mismatch means rebuild) and `vectors(seq, hash, script,
vector)`. Rows are keyed by the hash of the embedded text, so only a content edit re-embeds. Each batch
is one WAL transaction; a damaged file is moved aside and rebuilt. A process keeps every row in memory
and reads only the rows added since it last looked (by `seq`).
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import STATE_DIR
from ..model import Memory
from ..text import head
from .embedders import Embedder, _require

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

#: 2: rows numbered by AUTOINCREMENT (`seq`): a process reads the rows added since it last looked by
#: their number, which SQLite's plain rowid would give again to a row added after a prune.
SCHEMA = "2"
VECTORS_TABLE = (
    "CREATE TABLE vectors (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
    "hash TEXT NOT NULL UNIQUE, script TEXT NOT NULL, vector BLOB NOT NULL)"
)
#: What is embedded; part of every row's hash, so changing it re-embeds everything.
RECIPE = "content-v1"
#: The characters of a content that are embedded: about 1,000 of e5's tokens, two of its 512-token windows.
#: The engine embeds a longer text window by window, holding a server's one worker as long; what a
#: memory is about is in its first lines.
EMBEDDED_CHARS = 4096
#: Memories embedded per transaction (and per call to the engine).
BATCH = 32
VIETNAMESE = frozenset("ăâđêôơưạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹ")


def embed_text(memory: Memory) -> str:
    """The text embedded for a memory: its content, as written, up to `EMBEDDED_CHARS` (the key and
    category are left out: docs/semantic.md)."""
    return head(memory.content, EMBEDDED_CHARS)


def text_hash(text: str) -> str:
    """The cache key of an embedded text."""
    return hashlib.sha256(f"{RECIPE}\0{text}".encode()).hexdigest()


def by_hash(memories: Iterable[Memory]) -> dict[str, tuple[Memory, ...]]:
    """The memories by the cache key of their embedded text (`VectorCache.nearest`'s `by_hash`)."""
    out: dict[str, tuple[Memory, ...]] = {}
    for memory in memories:
        key = text_hash(embed_text(memory))
        out[key] = out.get(key, ()) + (memory,)
    return out


def script_of(text: str) -> str:
    """ "th" for text with Thai letters, "vi" for Latin text with Vietnamese letters, else "other"."""
    if any("\u0e00" <= c <= "\u0e7f" for c in text):
        return "th"
    lowered = text.lower()
    return "vi" if any(c in VIETNAMESE for c in lowered) else "other"


def _from_schema_1(db: sqlite3.Connection) -> None:
    """A file of schema 1 (rows numbered by rowid) brought to schema 2 in the caller's transaction,
    its vectors kept."""
    db.execute("ALTER TABLE vectors RENAME TO vectors_1")
    db.execute(VECTORS_TABLE)
    db.execute("INSERT INTO vectors (hash, script, vector) SELECT hash, script, vector FROM vectors_1 ORDER BY rowid")
    db.execute("DROP TABLE vectors_1")


@contextmanager
def _immediate(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction (`BEGIN IMMEDIATE`), rolled back if the block raises."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def cache_path(root: Path, mind: str, model_id: str) -> Path:
    """Where the vectors of one mind and model live."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{mind}-{model_id}").strip("-.") or "vectors"
    return Path(root) / STATE_DIR / f"vectors-{safe}.sqlite"


def compact(root: Path, mind: str, memories: Iterable[Memory]) -> None:
    """Delete from every vector file of `mind` the rows none of `memories` (all of the mind's) needs, and
    rewrite each file so no free page still holds them (a purge: nothing of a purged memory is kept). A
    file SQLite cannot read is removed: it is derived data, made again when needed."""
    keep = {text_hash(embed_text(memory)) for memory in memories}
    prefix = cache_path(Path(root), mind, "").stem + "-"
    for path in (Path(root) / STATE_DIR).glob("vectors-*.sqlite"):
        if not path.name.startswith(prefix):
            continue
        try:
            with closing(sqlite3.connect(path, timeout=30)) as db:  # a live process may be reading
                stored = [key for (key,) in db.execute("SELECT hash FROM vectors")]
                with db:
                    db.executemany("DELETE FROM vectors WHERE hash = ?", [(k,) for k in stored if k not in keep])
                db.execute("VACUUM")
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.DatabaseError:
            for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                leftover.unlink(missing_ok=True)


class VectorCache:
    """Vectors of one mind's memories for one embedder. Thread-safe; safe across processes.

    Make one with `VectorCache.open(root, mind, embedder)` and keep it for the life of the
    process: it holds the vectors read so far in memory.
    """

    def __init__(self, path: Path, embedder: Embedder) -> None:
        self.path = path
        self.embedder = embedder
        self.rebuilt = False  #: True when opening found a damaged or foreign file and started over
        self._lock = threading.RLock()
        self._db = self._connect()
        self._hashes: dict[str, str] = {}  # embedded text -> hash (saves sha256 on every search)
        self._forget()

    def _forget(self) -> None:
        """Forget the rows read so far (none yet, or the file is new)."""
        self._row: dict[str, int] = {}  # hash -> row of self._matrix
        self._hash_at: list[str] = []  # row of self._matrix -> hash
        self._scripts: list[str] = []
        self._matrix: Any = None
        self._blocks: list[Any] = []  # row blocks read since, stacked into _matrix when it is next needed
        self._last_seq = 0
        self._centred: Any = None

    @classmethod
    def open(cls, root: str | os.PathLike[str], mind: str, embedder: Embedder) -> VectorCache:
        """The cache of `mind` in the vault at `root` for `embedder`, made if missing, rebuilt if damaged."""
        return cls(cache_path(Path(root), mind, embedder.model_id), embedder)

    # --- the file -------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            return self._try_connect()
        except sqlite3.DatabaseError:
            self._discard()
            return self._try_connect()

    def _try_connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA busy_timeout = 60000")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            if db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("quick_check failed")
            want = {
                "schema": SCHEMA,
                "model_id": self.embedder.model_id,
                "dimension": str(self.embedder.dimension),
                "recipe": RECIPE,
            }
            with _immediate(db):
                db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                have = dict(db.execute("SELECT key, value FROM meta").fetchall())
                if have and have != want and have == want | {"schema": "1"}:
                    _from_schema_1(db)
                    db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (SCHEMA,))
                elif not have:
                    db.execute(VECTORS_TABLE)
                    db.executemany("INSERT INTO meta VALUES (?, ?)", sorted(want.items()))
                elif have != want:
                    raise sqlite3.DatabaseError(f"the file was written for {have}, not {want}")
        except BaseException:
            db.close()
            raise
        return db

    def _discard(self) -> None:
        """Move a damaged or foreign file (and its WAL) out of the way; never trust it again."""
        self.rebuilt = True
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def _reopen_if_removed(self) -> None:
        """After `rm -rf .memfile` under a running process: start a new file and forget what was read."""
        if self.path.exists():
            return
        with self._lock:
            self._db.close()
            self._db = self._connect()
            self._forget()

    def close(self) -> None:
        """Close the file (the cache cannot be used afterwards)."""
        with self._lock:
            self._db.close()

    # --- what is there ----------------------------------------------------------------------------

    def hash_of(self, memory: Memory) -> str:
        """The cache key of a memory (memoised by its text)."""
        text = embed_text(memory)
        found = self._hashes.get(text)
        if found is None:
            if len(self._hashes) > 200_000:
                self._hashes.clear()
            found = self._hashes[text] = text_hash(text)
        return found

    def _load(self) -> None:
        """Read the rows added since the last look (by this or another process) into memory."""
        np = _require("numpy")
        dim = self.embedder.dimension
        rows = self._db.execute(
            "SELECT seq, hash, script, vector FROM vectors WHERE seq > ? ORDER BY seq", (self._last_seq,)
        ).fetchall()
        fresh: list[bytes] = []
        for seq, key, script, blob in rows:
            self._last_seq = max(self._last_seq, seq)
            if key in self._row or len(blob) != 4 * dim:
                continue  # a row of the wrong length is never trusted: its memory counts as missing
            self._row[key] = len(self._scripts)
            self._hash_at.append(key)
            self._scripts.append(script)
            fresh.append(blob)
        if fresh:
            self._blocks.append(np.frombuffer(b"".join(fresh), dtype=np.float32).reshape(len(fresh), dim))
            self._centred = None

    def _all(self) -> Any:
        """Every vector read so far, one row per hash in `_row`. The blocks read are stacked here, when the
        matrix is needed, not on each read (a store's `missing` reads a row; each stack copies every vector)."""
        self._load()
        if self._matrix is None or self._blocks:
            np = _require("numpy")
            empty = np.zeros((0, self.embedder.dimension), dtype=np.float32)
            self._matrix = np.ascontiguousarray(
                np.concatenate([empty if self._matrix is None else self._matrix, *self._blocks])
            )
            self._blocks = []
        return self._matrix

    def missing(self, memories: Iterable[Memory]) -> list[Memory]:
        """The memories whose text has no vector yet (one per distinct text), in the order given."""
        with self._lock:
            self._load()
            out: list[Memory] = []
            seen: set[str] = set()
            for memory in memories:
                key = self.hash_of(memory)
                if key not in self._row and key not in seen:
                    seen.add(key)
                    out.append(memory)
            return out

    def counts(self, memories: Sequence[Memory] | Mapping[str, Sequence[Memory]]) -> tuple[int, int]:
        """(how many of these memories have a vector, how many there are): for `status`, and for a search
        (`memories` by their key, `by_hash`: no text is hashed again)."""
        with self._lock:
            self._load()
            if isinstance(memories, Mapping):
                groups = [(key in self._row, len(group)) for key, group in memories.items()]
                return sum(n for embedded, n in groups if embedded), sum(n for _, n in groups)
            return sum(1 for m in memories if self.hash_of(m) in self._row), len(memories)

    # --- embedding --------------------------------------------------------------------------------

    def embed(
        self,
        memories: Iterable[Memory],
        *,
        progress: Callable[[int, int], None] | None = None,
        stop: Callable[[], bool] | None = None,
        batch: int = BATCH,
    ) -> int:
        """Embed the memories that have no vector yet, `batch` at a time; returns how many were embedded.

        Each batch is committed on its own, so a crash or a `stop()` keeps the batches done.
        `progress(done, todo)` is called after each batch; `stop()` is checked before each batch
        (a resident process passes "a request is waiting", so idle-time work yields at once).
        """
        self._reopen_if_removed()
        # Texts of similar length share a batch: the engine pads a batch to its longest text.
        todo = sorted(self.missing(memories), key=lambda m: len(embed_text(m)))
        done = 0
        for start in range(0, len(todo), batch):
            if stop is not None and stop():
                break
            chunk = todo[start : start + batch]
            texts = [embed_text(m) for m in chunk]
            vectors = self.embedder.embed_documents(texts)
            self._write([(self.hash_of(m), script_of(t), v) for m, t, v in zip(chunk, texts, vectors)])
            done += len(chunk)
            if progress is not None:
                progress(done, len(todo))
        return done

    def _write(self, rows: list[tuple[str, str, Any]]) -> None:
        np = _require("numpy")
        with self._lock, _immediate(self._db):
            self._db.executemany(
                "INSERT OR IGNORE INTO vectors (hash, script, vector) VALUES (?, ?, ?)",
                [(key, script, np.asarray(v, dtype="<f4").tobytes()) for key, script, v in rows],
            )

    def prune(self, memories: Iterable[Memory]) -> int:
        """Delete the rows no memory of `memories` (all of the mind's) needs; returns how many.

        Pass every memory of the mind (superseded and expired too), never a filtered list.
        """
        keep = {self.hash_of(m) for m in memories}
        with self._lock:
            stored = [key for (key,) in self._db.execute("SELECT hash FROM vectors")]
            gone = [key for key in stored if key not in keep]
            if gone:
                with _immediate(self._db):
                    self._db.executemany("DELETE FROM vectors WHERE hash = ?", [(key,) for key in gone])
            return len(gone)

    # --- reading vectors --------------------------------------------------------------------------

    def matrix_for(self, memories: Sequence[Memory]) -> tuple[NDArray[np.float32], list[Memory]]:
        """(one vector per memory that has one, those memories), in the order given."""
        with self._lock:
            matrix = self._all()
            found = [(row, m) for m in memories if (row := self._row.get(self.hash_of(m))) is not None]
            return matrix[[row for row, _ in found]], [m for _, m in found]

    def nearest(
        self,
        query: Any,
        by_hash: Mapping[str, Sequence[Memory]],
        depth: int,
        *,
        admit: Callable[[Memory], bool] | None = None,
        centre: bool = False,
    ) -> list[tuple[Memory, float]]:
        """The `depth` memories nearest `query`, best first (ties by path), each with its raw cosine.

        `by_hash` holds the memories that may be ranked, by `hash_of`; `admit`, when given, must also
        pass (checked on the nearest rows only). With `centre`, ranked by the cosine after removing
        each script's mean row (see `centred`).
        """
        np = _require("numpy")
        with self._lock:
            matrix = self._all()
            if not len(matrix) or depth < 1:
                return []
            raw = matrix @ query
            ranking = self.centred() @ query if centre else raw
            order = np.argsort(-ranking, kind="stable")
            found: list[tuple[float, str, Memory, float]] = []
            floor: float | None = None  # the ranking score of the depth-th memory found
            for row in order.tolist():
                score = float(ranking[row])
                if floor is not None and score < floor:
                    break
                for memory in by_hash.get(self._hash_at[row], ()):
                    if admit is None or admit(memory):
                        found.append((score, memory.path, memory, float(raw[row])))
                if floor is None and len(found) >= depth:
                    floor = score  # rows scoring the same as this one still count (ties go by path)
            found.sort(key=lambda f: (-f[0], f[1]))
            return [(memory, cosine) for _, _, memory, cosine in found[:depth]]

    def cosine(self, memory: Memory, query: Any) -> float | None:
        """The raw cosine of `memory` to `query` (None: it has no vector)."""
        with self._lock:
            matrix = self._all()
            row = self._row.get(self.hash_of(memory))
            return None if row is None else float(matrix[row] @ query)

    def centred(self) -> NDArray[np.float32]:
        """Every row less the mean row of its script ("th", "vi", "other"), renormalised.

        multilingual-e5-small puts a question near every text in the question's language; taking
        out each language's mean direction leaves what the text is about. The means come from the
        vault's own vectors (recomputed when rows are added), never from questions or answers.
        """
        with self._lock:
            matrix = self._all()
            if self._centred is None or len(self._centred) != len(matrix):
                np = _require("numpy")
                out = matrix.copy()
                scripts = np.array(self._scripts)
                for script in set(self._scripts):
                    mask = scripts == script
                    if mask.sum() > 1:
                        out[mask] -= matrix[mask].mean(axis=0)
                norms = np.linalg.norm(out, axis=1, keepdims=True)
                self._centred = np.ascontiguousarray(out / np.where(norms > 0, norms, 1.0), dtype=np.float32)
            return self._centred
