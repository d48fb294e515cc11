"""Upstream -> AmbiTab converters (paper Table 5; docs/design.md section 9, Data and converters).

One module per source: :mod:`~ambitab_gym.convert.ambiqt`, :mod:`~ambitab_gym.convert.ew_bird`,
:mod:`~ambitab_gym.convert.ambrosia`, :mod:`~ambitab_gym.convert.taco`,
:mod:`~ambitab_gym.convert.bird_interact` and :mod:`~ambitab_gym.convert.bird`; each exposes
``convert(options, workspace) -> Conversion``. :func:`build_corpus` runs one of them, checks
every record against its database, writes the corpus folder with its manifest, validates it and
installs it in the data home (``ambitab-gym build``). The model-based filters are optional hooks
in :mod:`~ambitab_gym.convert.hooks`.
"""

from __future__ import annotations

from ambitab_gym.convert.builder import SOURCES, BuildReport, build_corpus, corpus_for_source
from ambitab_gym.convert.common import BuildError, BuildOptions, Conversion, Drop, Item, Workspace

__all__ = [
    "SOURCES",
    "BuildError",
    "BuildOptions",
    "BuildReport",
    "Conversion",
    "Drop",
    "Item",
    "Workspace",
    "build_corpus",
    "corpus_for_source",
]
