"""Install upstream downloads in the data home and build their corpora.

* :class:`DownloadOptions` - the user's choices (mirror, local file, checksum, consent, build).
* :func:`download` - fetch, verify and install every artifact of one source, then run its
  ``build`` (the same :func:`~ambitab_gym.convert.build_corpus` the ``build`` command calls).
* :func:`download_all` - every source that may be fetched without a manual step; builds run
  once each, after all downloads.
* :func:`upstream_dir` - ``<data home>/upstream``: one folder per artifact, in the upstream
  layout ``ambitab-gym build`` reads, each with a ``.ambitab-download.json`` record (URL,
  revision, SHA-256 and how it was checked); ``checksums.json`` holds the trust-on-first-use
  digests; ``.downloads/`` the partial and finished transfers.

Nothing is half-installed: an archive is unpacked beside its target, its layout is checked and
only then is it moved into place (replacing an earlier copy); a failure removes the staging
folder and keeps only a partial transfer, which the next run resumes.

Example:
    >>> options = DownloadOptions(build=False)
    >>> options.url_base is None and options.accept_unlicensed is False
    True
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import httpx

from ambitab_gym.convert.builder import BuildReport, build_corpus
from ambitab_gym.convert.common import BuildError, BuildOptions
from ambitab_gym.corpora.home import data_home
from ambitab_gym.download.fetch import (
    ChecksumMismatch,
    DownloadError,
    fetch,
    git_blob_sha1,
    http_client,
    sha256_of,
)
from ambitab_gym.download.sources import SOURCES, Artifact, Source, get_source

__all__ = [
    "CHECKSUMS_FILE",
    "RECORD_FILE",
    "URL_BASE_ENV",
    "ConsentRequired",
    "DownloadOptions",
    "DownloadReport",
    "InstalledArtifact",
    "ManualDownloadRequired",
    "artifact_url",
    "download",
    "download_all",
    "installed_record",
    "upstream_dir",
]

#: environment variable naming a mirror (same meaning as ``--url-base``)
URL_BASE_ENV = "AMBITAB_DOWNLOAD_URL_BASE"
RECORD_FILE = ".ambitab-download.json"
CHECKSUMS_FILE = "checksums.json"
HUB = "https://huggingface.co"
_SKIP = {"__MACOSX", ".DS_Store"}

Notify = Callable[[str], None]


class ManualDownloadRequired(DownloadError):
    """The source is distributed by hand (Ambrosia, AmbiTab-Bird): ``steps`` say how.

    >>> ManualDownloadRequired("x", ("step",)).steps
    ('step',)
    """

    category = "manual_download"

    def __init__(self, message: str, steps: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.steps = tuple(steps)


class ConsentRequired(ManualDownloadRequired):
    """The source carries no licence (TACO): it is fetched only with ``--accept-unlicensed``.

    >>> ConsentRequired("x").category
    'consent'
    """

    category = "consent"


@dataclass
class DownloadOptions:
    """The user's choices for ``download``.

    Attributes:
        url_base: a mirror: archives come from ``<url_base>/<artifact>/<file name>`` and
            Hugging Face repositories from ``<url_base>/<artifact>`` as a Hub endpoint
            (default: ``$AMBITAB_DOWNLOAD_URL_BASE``, else the pinned URLs).
        file: a local copy of the source's own artifact (a downloaded archive, a folder, or
            the CSV/JSONL of a manual source) used instead of fetching it.
        sha256: the expected SHA-256 of the source's own archive or file (overrides the
            pinned or recorded one, and is recorded).
        accept_unlicensed: consent to fetch a source that carries no licence (TACO).
        build: run the matching ``build`` after installing.
        force: fetch and install again even when installed.
        keep_archive: keep the downloaded archive in ``upstream/.downloads`` after unpacking.
        show_progress: tqdm bars on stderr.
        ground_truth: BIRD-Interact's withheld solutions (JSONL by ``instance_id``), for the
            build.
        seed: the build seed.
        timeout: seconds to wait for each read from the server.
        revision: another revision (commit, branch or tag) of a Hugging Face source than the
            pinned one; its files are still checked against the Hub's digests.
        progress_every: without ``show_progress`` (stderr not a terminal), a progress line
            goes to the notifier at most every this many seconds.
    """

    url_base: str | None = None
    file: Path | None = None
    sha256: str | None = None
    accept_unlicensed: bool = False
    build: bool = True
    force: bool = False
    keep_archive: bool = False
    show_progress: bool = False
    ground_truth: Path | None = None
    seed: int = 0
    timeout: float = 60.0
    revision: str | None = None
    progress_every: float = 30.0

    def mirror(self) -> str | None:
        base = self.url_base if self.url_base is not None else os.environ.get(URL_BASE_ENV)
        return base.rstrip("/") if base else None


@dataclass
class InstalledArtifact:
    """One installed artifact and how it was checked.

    ``checksum`` is ``pinned`` (the table's value), ``given`` (``--sha256``), ``recorded``
    (first download: its SHA-256 is now trusted), ``tofu`` (matches the recorded one),
    ``hub`` (every file matched the Hub's published digests), ``folder`` (a local folder:
    no single digest) or ``installed`` (already there; verified when installed).

    Example:
        >>> InstalledArtifact("spider", "/x", "ab", "pinned").as_dict()["checksum"]
        'pinned'
    """

    name: str
    path: str
    sha256: str | None
    checksum: str
    resumed_from: int = 0
    files: int = 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": self.path,
            "sha256": self.sha256,
            "checksum": self.checksum,
            "resumed_from": self.resumed_from,
            "files": self.files,
        }


@dataclass
class DownloadReport:
    """What ``download SOURCE`` did (the ``--json`` object).

    Example:
        >>> DownloadReport("spider").as_dict()
        {'source': 'spider', 'artifacts': [], 'build': None, 'build_seconds': None, 'notes': []}
    """

    source: str
    artifacts: list[InstalledArtifact] = field(default_factory=list)
    build: BuildReport | None = None
    build_seconds: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.build is None or self.build.ok

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "artifacts": [a.as_dict() for a in self.artifacts],
            "build": self.build.as_dict() if self.build is not None else None,
            "build_seconds": self.build_seconds,
            "notes": list(self.notes),
        }


def upstream_dir() -> Path:
    """``<data home>/upstream``, where downloads are installed."""
    return data_home() / "upstream"


def installed_record(name: str) -> dict[str, Any] | None:
    """The install record of an artifact, or None when it is not installed.

    >>> installed_record("no-such-artifact") is None
    True
    """
    path = upstream_dir() / name / RECORD_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None


def artifact_url(artifact: Artifact, url_base: str | None) -> str:
    """Where an archive is fetched from: the pinned URL, or the mirror's
    ``<base>/<artifact>/<file name>``.

    >>> from ambitab_gym.download.sources import get_source
    >>> artifact_url(get_source("bird-dev").artifacts[0], "http://127.0.0.1:8000/m")
    'http://127.0.0.1:8000/m/bird-dev/dev.zip'
    """
    if artifact.url is None:
        raise DownloadError(f"{artifact.name} has no URL: it is installed from a local file")
    if url_base:
        return f"{url_base.rstrip('/')}/{artifact.name}/{artifact.filename}"
    return artifact.url


# -- checksums ------------------------------------------------------------------------------------


def _load_checksums(up: Path) -> dict[str, dict[str, Any]]:
    path = up / CHECKSUMS_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text("utf-8"))
    except ValueError as error:
        raise DownloadError(f"{path} is not valid JSON ({error}); fix or delete it") from error
    return data if isinstance(data, dict) else {}


def _save_checksum(up: Path, name: str, sha256: str, size: int, origin: str) -> None:
    data = _load_checksums(up)
    data[name] = {"sha256": sha256, "size": size, "origin": origin}
    up.mkdir(parents=True, exist_ok=True)
    tmp = up / f".{CHECKSUMS_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, up / CHECKSUMS_FILE)


_ORIGINS = {
    "given": "given with --sha256",
    "pinned": "pinned in the download table",
    "tofu": "recorded at the first download",
    "recorded": "none published",
}


def _expected(
    artifact: Artifact, given: str | None, up: Path
) -> tuple[str | None, int | None, str]:
    """The expected SHA-256 and size of an artifact, and where the value comes from."""
    if given:
        return given.lower(), None, "given"
    if artifact.sha256:
        return artifact.sha256, artifact.size, "pinned"
    recorded = _load_checksums(up).get(artifact.name)
    if recorded and recorded.get("sha256"):
        return str(recorded["sha256"]), recorded.get("size"), "tofu"
    return None, artifact.size, "recorded"


# -- unpacking ------------------------------------------------------------------------------------


def _safe_parts(name: str) -> tuple[str, ...]:
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if name.startswith(("/", "\\")) or any(p == ".." for p in parts) or (parts and ":" in parts[0]):
        raise DownloadError(f"the archive holds an unsafe path {name!r}; nothing was installed")
    return parts


def _extract_zip(path: Path, into: Path) -> None:
    with zipfile.ZipFile(path) as archive:
        members = []
        for info in archive.infolist():
            parts = _safe_parts(info.filename)
            if not parts or parts[0] in _SKIP or parts[-1] in _SKIP:
                continue
            if info.flag_bits & 0x1:
                raise DownloadError(
                    f"{path.name} is password-protected: unzip it with the password its "
                    "authors give and pass the extracted file or folder with --file"
                )
            members.append(info)
        archive.extractall(into, members=members)


def _extract(path: Path, into: Path, filename: str | None) -> None:
    """Unpack a zip or tar archive into ``into``; copy any other file or folder there."""
    into.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        shutil.copytree(path, into / path.name, symlinks=False)
    elif zipfile.is_zipfile(path):
        _extract_zip(path, into)
    elif tarfile.is_tarfile(path):
        with tarfile.open(path) as archive:
            for member in archive.getmembers():
                _safe_parts(member.name)
            if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12 / 3.11.4
                archive.extractall(into, filter="data")
            else:  # pragma: no cover - older interpreters; member paths were checked above
                archive.extractall(into)
    else:
        shutil.copy2(path, into / (filename or path.name))


def _unpack_nested(root: Path, names: tuple[str, ...]) -> None:
    for name in names:
        for inner in sorted(root.rglob(name)):
            if any(part in _SKIP for part in inner.relative_to(root).parts):
                continue
            _extract_zip(inner, inner.parent)
            inner.unlink()


def _find_root(top: Path, layout: tuple[str, ...], depth: int = 3) -> Path | None:
    """The shallowest folder under ``top`` that holds every ``layout`` path."""
    level = [top]
    for _ in range(depth + 1):
        for folder in level:
            if all((folder / item).exists() for item in layout):
                return folder
        level = [
            child
            for folder in level
            for child in sorted(folder.iterdir())
            if child.is_dir() and child.name not in _SKIP
        ]
    return None


def _move_into_place(root: Path, target: Path, record: dict[str, Any]) -> None:
    (root / RECORD_FILE).write_text(
        json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
    try:
        os.replace(root, target)
    except OSError:
        if old is not None:
            os.replace(old, target)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _install_tree(source_path: Path, artifact: Artifact, up: Path, record: dict[str, Any]) -> Path:
    """Unpack ``source_path`` beside the target, check the layout, move it into place."""
    target = up / artifact.name
    staging = up / f".staging-{artifact.name}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        _extract(source_path, staging, artifact.filename)
        _unpack_nested(staging, artifact.unpack_nested)
        root = _find_root(staging, artifact.layout)
        if root is None:
            raise DownloadError(
                f"{source_path.name} does not hold {artifact.name}'s expected layout "
                f"({', '.join(artifact.layout)}); nothing was installed"
            )
        if root != staging:
            record["top_folder"] = root.relative_to(staging).as_posix()
        _move_into_place(root, target, record)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


# -- artifacts ------------------------------------------------------------------------------------


def _human(size: float) -> str:
    """A byte count for people.

    >>> _human(999), _human(1_536_000), _human(33.4e9)
    ('999 B', '1.5 MB', '33.4 GB')
    """
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"  # pragma: no cover


def _progress_lines(
    name: str, options: DownloadOptions, notify: Notify
) -> Callable[[int, int | None], None] | None:
    """Progress as notifier lines, where no tqdm bar is drawn."""
    if options.show_progress:
        return None

    def report(done: int, total: int | None) -> None:
        if total:
            notify(f"{name}: {_human(done)} of {_human(total)} ({100 * done / total:.0f}%)")
        else:
            notify(f"{name}: {_human(done)}")

    return report


def _install_archive(
    artifact: Artifact,
    options: DownloadOptions,
    local: Path | None,
    given_sha: str | None,
    client: httpx.Client,
    notify: Notify,
) -> InstalledArtifact:
    up = upstream_dir()
    expected, size, how = _expected(artifact, given_sha, up)
    downloads = up / ".downloads" / artifact.name
    resumed = 0
    if local is not None:
        path = Path(local).expanduser()
        if not path.exists():
            raise DownloadError(f"--file {path} does not exist")
        origin = f"file:{path.name}"
        if path.is_dir():
            actual, how = None, "folder"
        else:
            actual = sha256_of(path)
            if expected is not None and actual != expected:
                raise ChecksumMismatch(
                    f"checksum mismatch for {path}: expected SHA-256 {expected} "
                    f"({_ORIGINS[how]}), got {actual}; nothing was installed (pass --sha256 to "
                    "accept this file)"
                )
    else:
        url = artifact_url(artifact, options.mirror())
        origin = url
        notify(f"{artifact.name}: downloading {url}")
        result = fetch(
            url,
            downloads / (artifact.filename or artifact.name),
            client=client,
            sha256=expected,
            size=size,
            show_progress=options.show_progress,
            label=artifact.name,
            expected_from=_ORIGINS[how],
            report=_progress_lines(artifact.name, options, notify),
            report_every=options.progress_every,
        )
        path, actual, resumed = result.path, result.sha256, result.resumed_from
        if resumed:
            notify(f"{artifact.name}: resumed at byte {resumed}")
    record = {
        "artifact": artifact.name,
        "kind": artifact.kind,
        "url": artifact.url,
        "origin": origin,
        "sha256": actual,
        "checksum": how,
        "size": path.stat().st_size if path.is_file() else None,
    }
    try:
        target = _install_tree(path, artifact, up, record)
    except DownloadError:
        if local is None:  # a wrong archive is not worth keeping
            path.unlink(missing_ok=True)
        raise
    if actual is not None and how in ("recorded", "given"):
        _save_checksum(up, artifact.name, actual, path.stat().st_size, origin)
    if how == "recorded" and actual is not None:
        notify(
            f"{artifact.name}: no published checksum; recorded SHA-256 {actual} in "
            f"{up / CHECKSUMS_FILE} (trust on first use): later downloads must match it"
        )
    elif how == "tofu":
        notify(f"{artifact.name}: SHA-256 matches the one recorded at the first download")
    if local is None and not options.keep_archive:
        path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # only when empty
            downloads.rmdir()
    return InstalledArtifact(artifact.name, str(target), actual, how, resumed)


def _hub_listing(client: httpx.Client, origin: str, artifact: Artifact) -> list[dict[str, Any]]:
    url: str | None = (
        f"{origin}/api/datasets/{artifact.repo}/tree/{artifact.revision}?recursive=true"
    )
    entries: list[dict[str, Any]] = []
    while url:
        try:
            response = client.get(url)
        except httpx.TransportError as error:
            raise DownloadError(
                f"cannot list {url}: {error.__class__.__name__}: {error}"
            ) from error
        if response.status_code != 200:
            raise DownloadError(f"{url}: HTTP {response.status_code} {response.reason_phrase}")
        try:
            page = response.json()
        except ValueError as error:
            raise DownloadError(f"{url} did not answer with a JSON file list") from error
        entries += [e for e in page if isinstance(e, dict) and e.get("type") == "file"]
        url = response.links.get("next", {}).get("url")
    if not entries:
        raise DownloadError(f"{artifact.repo}@{artifact.revision} lists no files")
    return entries


def _install_hub(
    artifact: Artifact, options: DownloadOptions, client: httpx.Client, notify: Notify
) -> InstalledArtifact:
    up = upstream_dir()
    base = options.mirror()
    origin = f"{base}/{artifact.name}" if base else HUB
    entries = _hub_listing(client, origin, artifact)
    files = up / ".downloads" / artifact.name / "files"
    notify(f"{artifact.name}: {len(entries)} files of {artifact.repo}@{artifact.revision[:12]}")
    resumed = 0
    for entry in entries:
        relative = "/".join(_safe_parts(str(entry["path"])))
        dest = files / relative
        lfs = entry.get("lfs") or {}
        sha = lfs.get("oid") if isinstance(lfs, dict) else None
        blob = None if sha else entry.get("oid")
        if dest.is_file() and (
            (sha and sha256_of(dest) == sha) or (blob and git_blob_sha1(dest) == blob)
        ):
            continue  # fetched and verified by an earlier run
        url = f"{origin}/datasets/{artifact.repo}/resolve/{artifact.revision}/{relative}"
        result = fetch(
            url,
            dest,
            client=client,
            sha256=sha,
            size=entry.get("size"),
            show_progress=options.show_progress,
            label=relative,
            accept_html=True,
            expected_from="published by the Hub",
        )
        resumed += result.resumed_from
        if blob and git_blob_sha1(dest) != blob:
            dest.unlink()
            raise ChecksumMismatch(
                f"checksum mismatch for {url}: its git blob id is not the Hub's {blob}; "
                "the file was deleted and nothing was installed"
            )
    if _find_root(files, artifact.layout, depth=0) is None:
        raise DownloadError(
            f"{artifact.repo}@{artifact.revision} lacks {', '.join(artifact.layout)}; "
            "nothing was installed"
        )
    record = {
        "artifact": artifact.name,
        "kind": artifact.kind,
        "repo": artifact.repo,
        "revision": artifact.revision,
        "origin": origin,
        "files": len(entries),
        "checksum": "hub",
    }
    target = up / artifact.name
    _move_into_place(files, target, record)
    shutil.rmtree(up / ".downloads" / artifact.name, ignore_errors=True)
    return InstalledArtifact(artifact.name, str(target), None, "hub", resumed, len(entries))


def _install(
    artifact: Artifact,
    options: DownloadOptions,
    own: bool,
    client: httpx.Client,
    notify: Notify,
) -> InstalledArtifact:
    local = options.file if own else None
    record = installed_record(artifact.name)
    other_revision = (
        own and options.revision and record and record.get("revision") != options.revision
    )
    if record is not None and local is None and not (options.force and own) and not other_revision:
        notify(f"{artifact.name}: already installed in {upstream_dir() / artifact.name}")
        return InstalledArtifact(
            artifact.name, str(upstream_dir() / artifact.name), record.get("sha256"), "installed"
        )
    if artifact.kind == "huggingface":
        if local is not None:
            raise DownloadError(f"{artifact.name} is fetched from the Hub; --file is not used")
        if own and options.revision:
            artifact = dataclasses.replace(artifact, revision=options.revision)
        return _install_hub(artifact, options, client, notify)
    if artifact.kind == "manual" and local is None:
        raise ManualDownloadRequired(f"{artifact.name} is installed from a file you download")
    return _install_archive(
        artifact, options, local, options.sha256 if own else None, client, notify
    )


# -- builds ---------------------------------------------------------------------------------------


def _bird_view(up: Path, into: Path) -> Path | None:
    """A folder linking every installed BIRD part (dev, train) side by side."""
    parts = [up / name for name in ("bird-dev", "bird-train") if (up / name / RECORD_FILE).exists()]
    if not parts:
        return None
    view = into / "bird"
    view.mkdir()
    for part in parts:
        for entry in sorted(part.iterdir()):
            link = view / entry.name
            if entry.name.startswith(".") or link.exists():
                continue
            try:
                link.symlink_to(entry, target_is_directory=entry.is_dir())
            except OSError as error:
                raise DownloadError(
                    f"cannot link {entry} into a build folder ({error}); build each part with "
                    f"ambitab-gym build ew-bird --source {part}"
                ) from error
    return view


def _build_options(
    source: Source, up: Path, options: DownloadOptions, scratch: Path
) -> BuildOptions | str:
    """The build's options, or a sentence saying why it cannot run yet."""
    progress = options.show_progress
    name = source.build
    if name == "ambiqt":
        return BuildOptions(
            source=up / "ambiqt", databases=up / "spider" / "database",
            seed=options.seed, show_progress=progress,
        )  # fmt: skip
    if name in ("ew-bird", "bird"):
        view = _bird_view(up, scratch)
        if view is None:
            return "BIRD's databases are not installed: run ambitab-gym download bird-dev"
        if name == "ew-bird":
            return BuildOptions(source=view, seed=options.seed, show_progress=progress)
        return BuildOptions(
            source=up / "ambitab-bird" / "records.jsonl", databases=view,
            seed=options.seed, show_progress=progress,
        )  # fmt: skip
    if name == "bird-interact":
        if options.ground_truth is None:
            return (
                "the public BIRD-Interact tasks withhold their solutions; rerun with "
                "--ground-truth SOLUTIONS.jsonl once the BIRD team has sent them"
            )
        return BuildOptions(
            source=up / "mini-interact", seed=options.seed, show_progress=progress,
            extra={"ground_truth": options.ground_truth, "dialect": "auto"},
        )  # fmt: skip
    return BuildOptions(source=up / str(source.artifacts[-1].name), seed=options.seed,
                        show_progress=progress)  # fmt: skip


def _run_build(source: Source, options: DownloadOptions, report: DownloadReport) -> None:
    if source.build is None:
        return
    with tempfile.TemporaryDirectory(prefix="ambitab-build-view-") as scratch:
        build_options = _build_options(source, upstream_dir(), options, Path(scratch))
        if isinstance(build_options, str):
            report.notes.append(f"not built: {build_options}")
            return
        started = time.perf_counter()
        try:
            report.build = build_corpus(source.build, build_options)
        except BuildError as error:
            report.build = BuildReport(source.build, None, 0, 0, 0, {}, error=str(error))
        report.build_seconds = round(time.perf_counter() - started, 2)


# -- entry points ---------------------------------------------------------------------------------


def _check_policy(source: Source, options: DownloadOptions) -> None:
    if source.policy == "manual" and options.file is None:
        raise ManualDownloadRequired(
            f"{source.name} cannot be downloaded automatically; install it from a file:",
            source.steps,
        )
    if source.policy == "acknowledge" and not options.accept_unlicensed:
        raise ConsentRequired(
            f"{source.name} carries no licence, so it is not downloaded without your consent:",
            source.steps,
        )


def _fetch_source(
    source: Source, options: DownloadOptions, client: httpx.Client, notify: Notify
) -> DownloadReport:
    _check_policy(source, options)
    report = DownloadReport(source.name)
    last = len(source.artifacts) - 1
    for index, artifact in enumerate(source.artifacts):
        report.artifacts.append(_install(artifact, options, index == last, client, notify))
    return report


def download(
    name: str,
    options: DownloadOptions | None = None,
    *,
    notify: Notify | None = None,
    client: httpx.Client | None = None,
) -> DownloadReport:
    """Fetch, verify and install one source, then build its corpus (unless ``options.build``
    is False).

    Raises:
        ManualDownloadRequired: a manual source without ``options.file`` (``steps`` say how).
        ConsentRequired: an unlicensed source without ``options.accept_unlicensed``.
        DownloadError: the transfer failed (a partial file is kept for the next run).
        ChecksumMismatch: the bytes are not the expected ones (nothing installed).
    """
    options = options or DownloadOptions()
    source = get_source(name)
    say = notify or (lambda _message: None)
    with contextlib.ExitStack() as stack:
        if client is None:
            client = stack.enter_context(http_client(options.timeout))
        report = _fetch_source(source, options, client, say)
    if options.build:
        _run_build(source, options, report)
    return report


def download_all(
    options: DownloadOptions | None = None,
    *,
    notify: Notify | None = None,
    client: httpx.Client | None = None,
) -> tuple[list[DownloadReport], list[tuple[str, str]], list[tuple[str, str]]]:
    """Every source that needs no manual step (TACO only with ``accept_unlicensed``).

    Each corpus is built once, after every download. ``options.file`` and ``options.sha256``
    are not used (they name one source's file).

    A source that fails (network, checksum) does not stop the others; nothing of it is
    installed and its partial transfer is kept for the next run.

    Returns:
        the reports of the installed sources, ``(source, reason)`` for each one skipped (a
        manual step or consent is needed) and ``(source, error)`` for each one that failed.
    """
    options = options or DownloadOptions()
    each = DownloadOptions(**{**options.__dict__, "file": None, "sha256": None, "build": False})
    say = notify or (lambda _message: None)
    reports: list[DownloadReport] = []
    skipped: list[tuple[str, str]] = []
    failed: list[tuple[str, str]] = []
    with contextlib.ExitStack() as stack:
        if client is None:
            client = stack.enter_context(http_client(options.timeout))
        for source in SOURCES.values():
            try:
                reports.append(_fetch_source(source, each, client, say))
            except ManualDownloadRequired as error:
                skipped.append((source.name, str(error).rstrip(":")))
            except DownloadError as error:
                failed.append((source.name, str(error)))
    if options.build:
        built: set[str] = set()
        for report in reports:
            source = SOURCES[report.source]
            if source.build and source.build not in built:
                built.add(source.build)
                _run_build(source, options, report)
    return reports, skipped, failed
