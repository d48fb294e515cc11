"""Corpora: the bundled samples, built corpora in the data home, and how to find them.

An env id or corpus name resolves (:func:`resolve_corpus`) to the corpus built into the data
home, else the bundled sample; a folder is used only when given as a path, never because the
working directory holds one of that name.
"""

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
    is_path_reference,
    load_corpus,
    resolve_corpus,
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
    "is_path_reference",
    "load_corpus",
    "resolve_corpus",
]
