"""Corpora: the bundled samples, built corpora in the data home, and how to find them."""

from __future__ import annotations

from ambitab_gym.corpora.corpus import (
    BUNDLED_DIR,
    ENV_IDS,
    Corpus,
    CorpusNotFound,
    DatabaseEntry,
    Manifest,
    available_corpora,
    corpus_name,
    load_corpus,
    register_engine,
)
from ambitab_gym.corpora.home import built_corpora_dir, cache_dir, data_home

__all__ = [
    "BUNDLED_DIR",
    "ENV_IDS",
    "Corpus",
    "CorpusNotFound",
    "DatabaseEntry",
    "Manifest",
    "available_corpora",
    "built_corpora_dir",
    "cache_dir",
    "corpus_name",
    "data_home",
    "load_corpus",
    "register_engine",
]
