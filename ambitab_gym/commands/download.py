"""``ambitab-gym download SOURCE``: fetch an upstream dataset, verify it, install it in the data
home and build its corpus.

* :func:`register` - adds the ``download`` subcommand.
* :func:`run` - runs it (``args -> exit status``: 0 done, 1 a download or build failed, 2 a
  manual step or consent is needed, or the command line is wrong).

Downloads resume where an interrupted run stopped; every archive is checked against a pinned
SHA-256 or the one recorded at its first download (trust on first use). With ``--json`` the
last line of stdout is one JSON object: ``{"reports": [{"source", "artifacts": [{"name",
"path", "sha256", "checksum", "resumed_from", "files"}], "build", "build_seconds", "notes"}],
"skipped": [{"source", "reason"}], "failed": [{"source", "error", "hint"?}]}``, also when
the download failed or a manual step is needed (``--all`` goes on after a source fails and
exits 1); ``hint`` says how to install the source offline (``--file``) or from a mirror
(``--url-base``). See ``docs/data.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["register", "run"]

_PROG = "ambitab-gym download"

_EPILOG = """
sources (see docs/data.md for URLs, licences, sizes and the paper's pools):
{table}

checksums: a pinned SHA-256 is checked; where none is published, the first download's
SHA-256 is recorded in <data home>/upstream/checksums.json and later downloads must match it
(--sha256 pins one yourself). An interrupted download resumes on the next run.
"""


def _table() -> str:
    from ambitab_gym.download.sources import SOURCES

    policy = {"open": "", "acknowledge": " [needs --accept-unlicensed]", "manual": " [--file]"}
    return "\n".join(f"  {s.name:<14} {s.title}{policy[s.policy]}" for s in SOURCES.values())


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``download`` subcommand."""
    from ambitab_gym.commands._args import non_negative_int
    from ambitab_gym.download.sources import source_names

    parser = subparsers.add_parser(
        "download",
        help="download an upstream dataset and build its corpus",
        description="Fetch an upstream dataset whose licence allows it (pinned URL, "
        "checksum, resumable), install it in <data home>/upstream in its native layout and "
        "build the matching corpus, as `ambitab-gym build` would.",
        epilog=_EPILOG.format(table=_table()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "source_name",
        metavar="SOURCE",
        nargs="?",
        choices=source_names(),
        help="upstream source: %(choices)s",
    )
    parser.add_argument("--all", action="store_true", help="every source that needs no manual step")
    parser.add_argument(
        "--list", action="store_true", help="list the sources and what is installed"
    )
    parser.add_argument(
        "--file",
        type=Path,
        metavar="PATH",
        help="install the source from a file or folder you downloaded (Ambrosia's CSV, an "
        "archive fetched in a browser)",
    )
    parser.add_argument("--sha256", metavar="HEX", help="expected SHA-256 of the source's file")
    parser.add_argument(
        "--url-base",
        metavar="URL",
        help="a mirror: archives from URL/<artifact>/<file>, Hugging Face repositories from "
        "URL/<artifact> (default: $AMBITAB_DOWNLOAD_URL_BASE)",
    )
    parser.add_argument(
        "--accept-unlicensed",
        action="store_true",
        help="fetch a source whose repository carries no licence (TACO): you have checked "
        "that your use is permitted",
    )
    parser.add_argument("--no-build", action="store_true", help="install only; do not build")
    parser.add_argument("--force", action="store_true", help="download again even if installed")
    parser.add_argument(
        "--keep-archive", action="store_true", help="keep the archive after unpacking it"
    )
    parser.add_argument(
        "--ground-truth",
        type=Path,
        metavar="PATH",
        help="bird-interact: the solutions the public release withholds (JSONL by instance_id)",
    )
    parser.add_argument(
        "--revision",
        metavar="REV",
        help="bird-interact: a Hugging Face revision other than the pinned commit (e.g. main)",
    )
    parser.add_argument("--seed", type=non_negative_int, default=0, help="build seed (default 0)")
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for the server (default 60)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON (last line)")
    parser.set_defaults(func=run)


def _list() -> int:
    from ambitab_gym.download.install import installed_record
    from ambitab_gym.download.sources import SOURCES

    for source in SOURCES.values():
        state = (
            "installed"
            if all(installed_record(a.name) for a in source.artifacts)
            else "not installed"
        )
        print(f"{source.name:<14} {source.policy:<11} {state:<13} {source.licence}")
    return 0


def _print_steps(error) -> None:
    print(f"{error}", file=sys.stderr)
    for number, step in enumerate(error.steps, 1):
        print(f"  {number}. {step}", file=sys.stderr)


def _summary(report, stream) -> None:
    for artifact in report.artifacts:
        digest = (
            f"sha256 {artifact.sha256[:16]}..." if artifact.sha256 else f"{artifact.files} files"
        )
        print(
            f"{artifact.name}: {artifact.path} ({digest}, checksum: {artifact.checksum})",
            file=stream,
        )
    build = report.build
    if build is not None:
        if build.ok:
            print(
                f"built {build.corpus}: {build.records} records, {build.avts} AVTs -> "
                f"{build.out} ({report.build_seconds:.1f} s)",
                file=stream,
            )
        else:
            print(f"{_PROG}: build {build.corpus} failed: {build.error}", file=sys.stderr)
    for note in report.notes:
        print(note, file=stream)


def run(args: argparse.Namespace) -> int:
    """Run a download; returns 0, 1 (failed) or 2 (a manual step or consent is needed)."""
    from ambitab_gym.download.fetch import DownloadError
    from ambitab_gym.download.install import (
        DownloadOptions,
        ManualDownloadRequired,
        download,
        download_all,
    )

    if args.list:
        return _list()
    if bool(args.all) == bool(args.source_name):
        print(f"{_PROG}: give one SOURCE or --all (see {_PROG} --help)", file=sys.stderr)
        return 2
    if args.all and (args.file or args.sha256):
        print(
            f"{_PROG}: --file and --sha256 name one source's file; not with --all", file=sys.stderr
        )
        return 2
    options = DownloadOptions(
        url_base=args.url_base,
        file=args.file,
        sha256=args.sha256,
        accept_unlicensed=args.accept_unlicensed,
        build=not args.no_build,
        force=args.force,
        keep_archive=args.keep_archive,
        show_progress=sys.stderr.isatty() and not args.json,
        ground_truth=args.ground_truth,
        seed=args.seed,
        timeout=args.timeout,
        revision=args.revision,
    )
    stream = sys.stderr if args.json else sys.stdout

    def notify(message: str) -> None:
        print(message, file=sys.stderr)

    reports = []
    skipped: list[tuple[str, str]] = []
    failed: list[tuple[str, str]] = []
    status = None
    try:
        if args.all:
            reports, skipped, failed = download_all(options, notify=notify)
        else:
            reports = [download(args.source_name, options, notify=notify)]
    except ManualDownloadRequired as error:
        _print_steps(error)
        skipped, status = [(args.source_name, str(error).rstrip(":"))], 2
    except DownloadError as error:
        failed, status = [(args.source_name, str(error))], 1
    for report in reports:
        _summary(report, stream)
    for name, reason in skipped:
        if status is None:
            print(f"skipped {name}: {reason} (see {_PROG} {name})", file=stream)
    hints = {}
    for name, reason in failed:
        print(f"{_PROG}: {name}: {reason}", file=sys.stderr)
        if args.file is None and "--file" not in reason and "checksum mismatch" not in reason:
            hints[name] = _offline_hint(name)
            print(f"  {hints[name]}", file=sys.stderr)
    if args.json:
        print(
            json.dumps(
                {
                    "reports": [r.as_dict() for r in reports],
                    "skipped": [{"source": s, "reason": r} for s, r in skipped],
                    "failed": [
                        {"source": s, "error": r, **({"hint": hints[s]} if s in hints else {})}
                        for s, r in failed
                    ],
                },
                ensure_ascii=False,
            )
        )
    if status is not None:
        return status
    return 0 if all(r.ok for r in reports) and not failed else 1


def _offline_hint(name: str) -> str:
    """What to do when a source cannot be fetched from here: install the file that failed
    from a copy fetched elsewhere (``--file``), or fetch from a mirror (``--url-base``)."""
    from ambitab_gym.download.install import installed_record
    from ambitab_gym.download.sources import SOURCES

    artifacts = SOURCES[name].artifacts
    failed = next((a for a in artifacts if installed_record(a.name) is None), artifacts[-1])
    mirror = "fetch from a mirror with --url-base URL (or $AMBITAB_DOWNLOAD_URL_BASE)"
    if failed.kind == "huggingface" or not failed.url:
        return f"offline or blocked? {mirror}; see docs/data.md"
    owner = next((s.name for s in SOURCES.values() if s.artifacts[-1] == failed), name)
    then = "" if owner == name else f", then rerun `{_PROG} {name}`"
    return (
        f"offline or blocked? fetch {failed.url} elsewhere and install it with "
        f"`{_PROG} {owner} --file PATH`{then}, or {mirror}; see docs/data.md"
    )
