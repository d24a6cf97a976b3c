"""memfile's version: a module of its own, so that a face names it without importing memfile's public names."""

__version__ = "0.1.0"
