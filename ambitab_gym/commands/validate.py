"""``ambitab-gym validate CORPUS_OR_PATH [--json]``: check every invariant of a corpus.

Exit status: 0 when the corpus is sound, 1 when any violation is found, 2 when the corpus cannot
be found (an unknown env id, name or folder).
"""

from __future__ import annotations

import argparse
import json
import sys

from ambitab_gym.corpora import Corpus, CorpusNotFound
from ambitab_gym.records import RecordError
from ambitab_gym.validate import CHECKS, resolve_corpus_folder, summarize, validate_corpus

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``validate`` subcommand."""
    checks = "; ".join(f"{code}: {text}" for code, text in CHECKS.items())
    parser = subparsers.add_parser(
        "validate",
        help="check every invariant of a corpus (exit 1 on any violation)",
        description="Check a corpus: " + checks + ". Exit status 0 when sound, 1 when any "
        "violation is found, 2 when the corpus cannot be found.",
    )
    parser.add_argument(
        "corpus",
        metavar="CORPUS_OR_PATH",
        help="an env id (AmbiTab-Bird-v0), a corpus name (bird) or a corpus folder",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the report as one JSON object (last line)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Validate ``args.corpus``; print the violations and a summary; return the exit status."""
    try:
        folder, origin = resolve_corpus_folder(args.corpus)
    except CorpusNotFound as error:
        print(f"ambitab-gym validate: {error}", file=sys.stderr)
        return 2
    name, records = folder.name, None
    try:
        corpus = Corpus(folder, origin=origin)
        name, records = corpus.name, len(corpus)
        violations = validate_corpus(corpus)
    except RecordError:
        violations = validate_corpus(folder)
    except CorpusNotFound as error:
        print(f"ambitab-gym validate: {error}", file=sys.stderr)
        return 2
    counts = summarize(violations)
    if args.json:
        report = {
            "corpus": name,
            "origin": origin,
            "path": str(folder),
            "records": records,
            "ok": not violations,
            "violations": [v.as_dict() for v in violations],
            "summary": counts,
        }
        print(json.dumps(report, ensure_ascii=False))
        return 1 if violations else 0
    for violation in violations:
        print(violation)
    where = f"corpus {name!r} ({origin}, {folder})"
    if not violations:
        print(f"{where}: OK - {records} records, no violations")
        return 0
    affected = len({v.record_id for v in violations if v.record_id is not None})
    detail = ", ".join(f"{code} {n}" for code, n in counts.items())
    print(f"{where}: {len(violations)} violations in {affected} records ({detail})")
    return 1
