"""Fetching the upstream datasets and building their corpora (``ambitab-gym download``).

* :mod:`~ambitab_gym.download.sources` - the pinned table: URLs, revisions, checksums,
  licences, which sources need a manual step, which ``build`` follows.
* :mod:`~ambitab_gym.download.fetch` - resumable HTTP downloads with checksum checks.
* :mod:`~ambitab_gym.download.install` - unpacking into ``<data home>/upstream`` in the exact
  layout the converters read, trust-on-first-use checksums, and the build.

See ``docs/data.md`` for every source's URL, licence, size and the paper's pool.
"""

from __future__ import annotations

from ambitab_gym.download.fetch import ChecksumMismatch, DownloadError, fetch
from ambitab_gym.download.install import (
    ConsentRequired,
    DownloadOptions,
    DownloadReport,
    ManualDownloadRequired,
    download,
    download_all,
    upstream_dir,
)
from ambitab_gym.download.sources import SOURCES, Artifact, Source, get_source

__all__ = [
    "SOURCES",
    "Artifact",
    "ChecksumMismatch",
    "ConsentRequired",
    "DownloadError",
    "DownloadOptions",
    "DownloadReport",
    "ManualDownloadRequired",
    "Source",
    "download",
    "download_all",
    "fetch",
    "get_source",
    "upstream_dir",
]
