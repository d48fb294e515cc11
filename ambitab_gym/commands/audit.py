"""``ambitab-gym audit RESULTS``: the oracle-response audit (a person marks credited answers).

Without ``--import``: writes a static, offline HTML page listing every distinct oracle answer
that was credited for an ambiguity in the file's campaigns, next to that ambiguity's resolution,
to be marked ``faithful`` / ``reveals more`` / ``wrong``; the page exports the marks as a JSON
file. With ``--import MARKS``: stores those marks in the results file (table ``audit_marks``).
Either way it prints the audited share per oracle and corpus, which ``ambitab-gym report`` shows
too.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ambitab_gym.commands._args import add_campaign_filter, output_file

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``audit`` subcommand."""
    parser = subparsers.add_parser(
        "audit",
        help="audit oracle answers against the resolutions they were credited for",
        description="Write an offline HTML page that lists each credited oracle answer next to "
        "the resolution of its ambiguity, to mark as faithful, reveals more or wrong and export "
        "as a marks JSON file; or store such a file's marks in the results file (--import). "
        "Prints the audited share per oracle and corpus.",
    )
    parser.add_argument("results", metavar="RESULTS", type=Path, help="DuckDB results file")
    parser.add_argument(
        "--import",
        dest="marks",
        type=Path,
        default=None,
        metavar="MARKS",
        help="store the marks of this file (exported from the audit page) and print the shares",
    )
    parser.add_argument(
        "--out",
        type=output_file,
        default=None,
        help="the audit page (default: RESULTS without suffix + '-audit.html')",
    )
    add_campaign_filter(parser)
    parser.add_argument(
        "--json", action="store_true", help="print the shares as one JSON array (last line)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the page or import marks; print the audited shares."""
    from ambitab_gym.evaluation.audit import (
        audit_items,
        audit_shares,
        import_marks,
        render_audit_page,
    )
    from ambitab_gym.evaluation.browser import campaign_records
    from ambitab_gym.evaluation.report import dataset_name, select_campaigns
    from ambitab_gym.evaluation.store import ResultsStore

    results: Path = args.results
    if not results.is_file():
        print(f"ambitab-gym audit: no results file at {results}", file=sys.stderr)
        return 2
    try:
        with ResultsStore(results) as store:
            stored = 0
            if args.marks is not None:
                stored = import_marks(store, args.marks)
            chosen = [
                c
                for c in select_campaigns(store, args.campaign)
                if c["kind"] in ("evaluate", "leakage")
            ]
            episodes = {c["campaign_id"]: store.episodes(c["campaign_id"]) for c in chosen}
            marks = store.audit_marks()
    except (OSError, ValueError, RuntimeError) as error:
        print(f"ambitab-gym audit: {error}", file=sys.stderr)
        return 2
    records, notes = campaign_records(chosen)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    names = {c["campaign_id"]: dataset_name(c) for c in chosen}
    items = audit_items(chosen, episodes, records, corpus_names=names)
    shares = audit_shares(items, marks)
    if args.marks is not None:
        print(f"stored {stored} mark(s) from {args.marks} in {results}")
    else:
        page = args.out or results.with_name(results.stem + "-audit.html")
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(render_audit_page(items, marks, source=str(results)), "utf-8")
        print(f"wrote the audit page of {len(items)} credited answer(s) to {page}")
        print(f"mark them there, export, then: ambitab-gym audit {results} --import MARKS.json")
    for row in shares:
        parts = ", ".join(
            f"{m.replace('_', ' ')} {row[m]}" for m in ("faithful", "reveals_more", "wrong")
        )
        share = "-" if row["share"] is None else f"{100 * row['share']:.1f}%"
        print(
            f"{row['oracle']} on {row['corpus']}: {row['audited']} of {row['items']} audited "
            f"({share}): {parts}"
        )
    if args.json:
        print(json.dumps(shares))
    return 0
