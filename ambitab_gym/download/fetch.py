"""Resumable, verified HTTP downloads (httpx) with a tqdm progress bar.

* :func:`fetch` - download one URL to a file: the bytes go to ``<file>.part`` first; a later
  call resumes it with an HTTP ``Range`` request (a server that ignores ``Range`` is read from
  the start again); the finished file is checked against the expected size and SHA-256 and
  only then renamed to its final name. A transfer that stops early keeps the ``.part`` file
  and raises :class:`DownloadError`; a checksum mismatch deletes it and raises
  :class:`ChecksumMismatch`.
* :func:`sha256_of`, :func:`git_blob_sha1` - the digests the download table and the Hugging
  Face Hub publish.
* :func:`http_client` - the client every download uses (redirects followed, a user agent).

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "f"
    >>> _ = path.write_bytes(b"hello")
    >>> sha256_of(path)[:12], git_blob_sha1(path)[:12]
    ('2cf24dba5fb0', 'b6fc4c620b67')
"""

from __future__ import annotations

import hashlib
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ambitab_gym.errors import AmbiTabError

__all__ = [
    "ChecksumMismatch",
    "DownloadError",
    "FetchResult",
    "fetch",
    "git_blob_sha1",
    "http_client",
    "sha256_of",
]

_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")


class DownloadError(AmbiTabError):
    """A download failed: unreachable server, HTTP error, interrupted transfer, wrong file.

    >>> DownloadError("connection refused").category
    'download'
    """

    category = "download"


class ChecksumMismatch(DownloadError):
    """The downloaded bytes are not the expected ones (nothing is installed).

    >>> ChecksumMismatch("x").category
    'checksum'
    """

    category = "checksum"


@dataclass(frozen=True)
class FetchResult:
    """A finished download.

    Attributes:
        path: the verified file.
        sha256: its SHA-256.
        size: its size in bytes.
        resumed_from: the byte offset the transfer resumed at (0: from the start).

    Example:
        >>> FetchResult(Path("x"), "ab", 2, 0).resumed_from
        0
    """

    path: Path
    sha256: str
    size: int
    resumed_from: int


def sha256_of(path: str | Path) -> str:
    """The SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def git_blob_sha1(path: str | Path) -> str:
    """Git's object id of a file (``sha1("blob <size>\\0" + bytes)``), which the Hugging Face
    Hub publishes for files not stored in LFS."""
    path = Path(path)
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def http_client(timeout: float = 60.0) -> httpx.Client:
    """The HTTP client for downloads (redirects followed; ``timeout`` per read, in seconds)."""
    from ambitab_gym import __version__

    return httpx.Client(
        follow_redirects=True,
        timeout=httpx.Timeout(timeout, connect=min(timeout, 30.0)),
        # byte ranges only mean something on the file as stored, never on a compressed stream
        headers={
            "User-Agent": f"ambitab-gym/{__version__} (+download)",
            "Accept-Encoding": "identity",
        },
    )


def _prefix_digest(part: Path, length: int) -> Any:
    digest = hashlib.sha256()
    with part.open("rb") as handle:
        remaining = length
        while remaining:
            chunk = handle.read(min(1 << 20, remaining))
            if not chunk:
                break
            digest.update(chunk)
            remaining -= len(chunk)
    return digest


def _verify(
    part: Path,
    dest: Path,
    digest,
    size: int,
    url: str,
    sha256: str | None,
    offset: int,
    expected_from: str,
) -> FetchResult:
    actual = digest.hexdigest()
    if sha256 is not None and actual != sha256.lower():
        part.unlink(missing_ok=True)
        raise ChecksumMismatch(
            f"checksum mismatch for {url}: expected SHA-256 {sha256.lower()} ({expected_from}), "
            f"got {actual} ({size} bytes); the file was deleted and nothing was installed"
        )
    part.replace(dest)
    return FetchResult(dest, actual, size, offset)


def fetch(
    url: str,
    dest: str | Path,
    *,
    client: httpx.Client,
    sha256: str | None = None,
    size: int | None = None,
    show_progress: bool = False,
    label: str | None = None,
    accept_html: bool = False,
    expected_from: str = "expected",
    report: Callable[[int, int | None], None] | None = None,
    report_every: float = 30.0,
) -> FetchResult:
    """Download ``url`` to ``dest``, resuming ``dest + ".part"`` when a partial file is there.

    Args:
        url: what to fetch.
        dest: the final file; written only once the bytes are complete and verified.
        client: the HTTP client (:func:`http_client`).
        sha256: the expected SHA-256, or None (the caller records what it gets).
        size: the expected size in bytes, when known.
        show_progress: draw a tqdm bar on stderr.
        label: the bar's label (default: the file name).
        accept_html: allow an HTML answer (by default an HTML page instead of an archive -
            a login or confirmation page - is an error that keeps nothing).
        expected_from: where ``sha256`` and ``size`` come from, for the error messages.
        report: called with (bytes so far, total or None) at most every ``report_every``
            seconds and once at the end: progress as log lines where no bar is drawn (stderr
            not a terminal).

    Raises:
        DownloadError: the server is unreachable, answers with an error or a web page, or the
            transfer stops early (the partial file is kept; call again to resume).
        ChecksumMismatch: the finished file has another SHA-256 (the file is deleted).
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    offset = part.stat().st_size if part.exists() else 0
    if size is not None and offset > size:
        part.unlink()
        offset = 0
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    try:
        with client.stream("GET", url, headers=headers) as response:
            if response.status_code == 416 and offset:
                # the partial file already holds every byte: verify it as it is
                digest = _prefix_digest(part, offset)
                return _verify(part, dest, digest, offset, url, sha256, offset, expected_from)
            if response.status_code == 206:
                match = _CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
                if not match or int(match.group(1)) != offset:
                    raise DownloadError(
                        f"{url}: the server answered the resume request with another range "
                        f"({response.headers.get('Content-Range')!r}); delete {part} and retry"
                    )
                total = int(match.group(3)) if match.group(3) != "*" else None
                mode, start = "ab", offset
            elif response.status_code == 200:
                length = response.headers.get("Content-Length")
                total = int(length) if length and length.isdigit() else None
                mode, start = "wb", 0  # a server that ignores Range sends everything again
            else:
                raise DownloadError(f"{url}: HTTP {response.status_code} {response.reason_phrase}")
            content_type = response.headers.get("Content-Type", "")
            if "text/html" in content_type and not accept_html:
                raise DownloadError(
                    f"{url} answered with a web page, not the file (a login, quota or "
                    "confirmation page?); download it in a browser and pass it with --file PATH"
                )
            if size is not None and total is not None and total != size:
                raise DownloadError(
                    f"{url}: the server offers {total} bytes, but {size} are expected "
                    f"({expected_from}); the upstream file changed (pass --sha256 to accept "
                    "another file)"
                )
            total = total if total is not None else size
            digest = _prefix_digest(part, start) if start else hashlib.sha256()
            received = start
            last = time.monotonic()
            bar = None
            if show_progress:
                from tqdm import tqdm

                bar = tqdm(
                    total=total,
                    initial=start,
                    unit="B",
                    unit_scale=True,
                    unit_divisor=1024,
                    desc=label or dest.name,
                    file=sys.stderr,
                    leave=False,
                )
            try:
                with part.open(mode) as handle:
                    for chunk in response.iter_bytes():  # as they arrive: none is lost on a cut
                        handle.write(chunk)
                        digest.update(chunk)
                        received += len(chunk)
                        if bar is not None:
                            bar.update(len(chunk))
                        if report is not None and time.monotonic() - last >= report_every:
                            report(received, total)
                            last = time.monotonic()
            except httpx.TransportError as error:
                raise DownloadError(
                    f"transfer of {url} interrupted after {received} of "
                    f"{total if total is not None else '?'} bytes ({error.__class__.__name__}); "
                    f"the partial file {part} is kept: run the command again to resume"
                ) from error
            finally:
                if bar is not None:
                    bar.close()
    except httpx.TransportError as error:
        raise DownloadError(
            f"cannot download {url}: {error.__class__.__name__}: {error}"
        ) from error
    if report is not None:
        report(received, total)
    if total is not None and received != total:
        raise DownloadError(
            f"transfer of {url} stopped after {received} of {total} bytes; the partial file "
            f"{part} is kept: run the command again to resume"
        )
    return _verify(part, dest, digest, received, url, sha256, start, expected_from)
