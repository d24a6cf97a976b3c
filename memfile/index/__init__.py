"""The index: the cache of a mind's files, for fast search and fast bulk reads.

The only place memfile imports whoosh and sqlite3. The files are the truth;
everything here can be deleted and is rebuilt from them.

- store.py: the Whoosh full-text index and the catalog of one folder, brought
  in line with the files by a stat-only diff, and searched;
- catalog.py: the SQLite half (each file's stat, parsed memory, recall entry);
- persisted.py: what is pickled into an index (its import path is API);
- query.py: typed text to a Whoosh query, and the BM25 parameters;
- score_cache.py: word scores, decoded hits and parsed queries of one searcher;
- snippet.py: the passages shown with a hit;
- fastpath.py: the speed tricks, each equal to the plain path (MEMFILE_PLAIN=1 turns them off).
"""

from __future__ import annotations

from .store import (
    BULK,
    CATALOG_NAME,
    CORRUPTION,
    INDEX_NAME,
    SCHEMA_VERSION,
    Index,
    SearchOptions,
    SyncReport,
    cannot_write,
    search_memories,
)

__all__ = ["BULK", "CATALOG_NAME", "CORRUPTION", "INDEX_NAME", "SCHEMA_VERSION", "Index", "SearchOptions", "SyncReport",
           "cannot_write", "search_memories"]
