"""What a campaign ran on: the corpus (name, origin, folder, checksum) and the package version.

* :func:`corpus_checksum` - sha256 over a corpus's manifest, records file and database files;
  each file's digest is cached by (path, size, modification time) in the data home, so a second
  campaign over an unchanged corpus reads no database file again.
* :class:`CampaignIdentity` - the corpus identity and the package version of a campaign;
  :meth:`CampaignIdentity.campaign_id` folds it into a configuration's hash, so a built corpus and
  the bundled sample of the same name (or two package versions) never share a campaign id.
* :func:`identity_of` - the identity of a loaded corpus under the installed package.
* :func:`config_hash` - the 16-hex-digit hash of a configuration (a campaign's name and id).
* :class:`CampaignMismatch` - a results file holds the same configuration over other data or
  another package version; raised before anything runs, saying what differs and what to do.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ambitab_gym import __version__
from ambitab_gym.corpora import Corpus
from ambitab_gym.corpora.home import cache_dir
from ambitab_gym.errors import ConfigurationError

__all__ = [
    "CHECKSUM_CACHE",
    "CampaignIdentity",
    "CampaignMismatch",
    "config_hash",
    "corpus_checksum",
    "corpus_files",
    "identity_of",
]

#: The file digest cache, relative to :func:`~ambitab_gym.corpora.home.cache_dir`.
CHECKSUM_CACHE = "corpus-checksums.json"

_CHUNK = 1 << 20
_cache_lock = threading.Lock()


def config_hash(config: Mapping[str, Any]) -> str:
    """A stable 16-hex-digit id of a configuration: sha256 of its sorted-key JSON.

    >>> config_hash({"b": 1, "a": (0, 1)}) == config_hash({"a": [0, 1], "b": 1})
    True
    >>> len(config_hash({}))
    16
    """
    payload = json.dumps(dict(config), sort_keys=True, default=list)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


class CampaignMismatch(ConfigurationError):
    """A results file holds a campaign of the same configuration over another corpus or package
    version: mixing their episodes is refused.

    >>> CampaignMismatch("differs").category
    'configuration'
    """


def corpus_files(corpus: Corpus) -> list[tuple[str, Path]]:
    """``(label, path)`` of every file whose content defines a corpus: the manifest, the
    records file and each database file the manifest lists (sorted by database name).

    >>> from ambitab_gym.corpora import load_corpus
    >>> [label for label, _ in corpus_files(load_corpus("taco"))][:2]
    ['manifest.json', 'records']
    """
    files = [
        ("manifest.json", corpus.path / "manifest.json"),
        ("records", corpus.path / corpus.manifest.records.file),
    ]
    for name, entry in sorted(corpus.manifest.databases.items()):
        files.append((f"database:{name}", corpus.path / entry.file))
    return files


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(path: Path, data: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".checksums-")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, sort_keys=True)
        os.replace(temporary, path)  # atomic: concurrent campaigns never read half a file
    except OSError:
        pass  # a read-only data home only costs the next campaign a re-read


def corpus_checksum(corpus: Corpus, *, cache: Path | None = None) -> str:
    """The sha256 (hex) of a corpus: over each file of :func:`corpus_files` (label and digest);
    a missing database file counts as ``missing``.

    Args:
        corpus: the corpus.
        cache: the digest cache file (default ``cache_dir() / CHECKSUM_CACHE``); a file whose
            size and modification time are unchanged is not read again.

    >>> from ambitab_gym.corpora import load_corpus
    >>> a = corpus_checksum(load_corpus("taco"))
    >>> a == corpus_checksum(load_corpus("taco")) != corpus_checksum(load_corpus("bird"))
    True
    """
    cache = cache or cache_dir() / CHECKSUM_CACHE
    with _cache_lock:
        known = _read_cache(cache)
        changed = False
        total = hashlib.sha256()
        for label, path in corpus_files(corpus):
            try:
                stat = path.stat()
            except OSError:
                total.update(f"{label}\tmissing\n".encode())
                continue
            key = str(path.resolve())
            stamp = [stat.st_size, stat.st_mtime_ns]
            entry = known.get(key)
            if isinstance(entry, list) and len(entry) == 3 and entry[:2] == stamp:
                digest = str(entry[2])
            else:
                digest = _file_digest(path)
                known[key] = [*stamp, digest]
                changed = True
            total.update(f"{label}\t{digest}\n".encode())
        if changed:
            _write_cache(cache, known)
    return total.hexdigest()


@dataclass(frozen=True)
class CampaignIdentity:
    """The data and code a campaign ran with.

    Attributes:
        corpus: the corpus name.
        origin: ``bundled``, ``built`` or ``path`` (see :func:`ambitab_gym.corpora.load_corpus`).
        path: the corpus folder.
        checksum: :func:`corpus_checksum`.
        version: the package version.

    >>> a = CampaignIdentity("bird", "bundled", "/b", "ab" * 32, "0.1.0")
    >>> b = CampaignIdentity("bird", "built", "/h", "cd" * 32, "0.1.0")
    >>> a.campaign_id("0123") != b.campaign_id("0123"), a.differences(b)[0]
    (True, "corpus origin: 'bundled' here, 'built' stored")
    """

    corpus: str
    origin: str
    path: str
    checksum: str
    version: str

    def campaign_id(self, name: str) -> str:
        """The campaign id of a configuration hash ``name`` run with this identity (16 hex
        digits; the folder is left out: the same data moved elsewhere is the same campaign)."""
        return config_hash(
            {
                "campaign": name,
                "corpus_origin": self.origin,
                "corpus_checksum": self.checksum,
                "package_version": self.version,
            }
        )

    def columns(self, name: str) -> dict[str, str]:
        """The identity columns of the results store's ``campaigns`` table."""
        return {
            "campaign_name": name,
            "corpus_origin": self.origin,
            "corpus_path": self.path,
            "corpus_checksum": self.checksum,
            "package_version": self.version,
        }

    @classmethod
    def from_columns(cls, corpus: str, stored: dict[str, Any]) -> CampaignIdentity:
        """The identity stored with a campaign (``unknown`` for what it did not store)."""
        return cls(
            corpus,
            stored.get("corpus_origin") or "unknown",
            stored.get("corpus_path") or "unknown",
            stored.get("corpus_checksum") or "unknown",
            stored.get("package_version") or "unknown",
        )

    def differences(self, stored: CampaignIdentity) -> list[str]:
        """What differs from a stored identity, one phrase per field."""
        out = []
        for label, mine, theirs in (
            ("corpus origin", self.origin, stored.origin),
            ("corpus checksum", self.checksum[:12], stored.checksum[:12]),
            ("package version", self.version, stored.version),
            ("corpus folder", self.path, stored.path),
        ):
            if mine != theirs:
                out.append(f"{label}: {mine!r} here, {theirs!r} stored")
        return out

    def describe(self) -> str:
        """One line: name, origin, folder and checksum prefix.

        >>> CampaignIdentity("bird", "bundled", "/b", "ab" * 32, "0.1.0").describe()
        'corpus bird (bundled, /b, checksum abababababab), ambitab-gym 0.1.0'
        """
        return (
            f"corpus {self.corpus} ({self.origin}, {self.path}, checksum {self.checksum[:12]}), "
            f"ambitab-gym {self.version}"
        )

    def to_dict(self) -> dict[str, str]:
        """A JSON-ready dict."""
        return asdict(self)


def identity_of(corpus: Corpus) -> CampaignIdentity:
    """The identity of a loaded corpus under the installed package version.

    >>> from ambitab_gym.corpora import load_corpus
    >>> identity_of(load_corpus("taco")).corpus
    'taco'
    """
    return CampaignIdentity(
        corpus.name, corpus.origin, str(corpus.path), corpus_checksum(corpus), __version__
    )
