"""``ambitab-gym report RESULTS``: figures (paper Figure 3 a-c) and an HTML page from a results file.

Shows every evaluate campaign of the file (or those named with ``--campaign``), one group per
corpus; campaigns of other kinds are listed as not shown.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ambitab_gym.commands._args import output_folder, positive_int

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``report`` subcommand."""
    parser = subparsers.add_parser(
        "report",
        help="draw figures and an HTML page from a results file",
        description="Draw success rate (without asker, with asker, full disambiguation), "
        "precision and recall per corpus as PNG (200 dpi) and PDF figures, and write an HTML "
        "page with the figures and the table (mean ± SD over seeds).",
    )
    parser.add_argument("results", metavar="RESULTS", type=Path, help="DuckDB results file")
    parser.add_argument(
        "--out",
        type=output_folder,
        default=None,
        help="output folder (default: RESULTS without suffix + '-report')",
    )
    parser.add_argument(
        "--campaign",
        action="append",
        default=None,
        metavar="ID",
        help="only this campaign (id or unique id prefix); repeat for several",
    )
    parser.add_argument(
        "--dpi", type=positive_int, default=200, help="PNG resolution (default 200)"
    )
    parser.add_argument(
        "--no-figures",
        action="store_true",
        help="write the HTML table only (no matplotlib needed)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the report; print the table and where the files went."""
    from ambitab_gym.evaluation import format_table
    from ambitab_gym.evaluation.report import MissingPlotDependency, write_report

    try:
        files = write_report(
            args.results,
            args.out,
            campaign_ids=args.campaign,
            figures=not args.no_figures,
            dpi=args.dpi,
        )
    except (OSError, ValueError, RuntimeError) as error:
        hint = " (or pass --no-figures)" if isinstance(error, MissingPlotDependency) else ""
        print(f"ambitab-gym report: {error}{hint}", file=sys.stderr)
        return 2
    table = {f"{e.group} {e.label}": e.summary for e in files.entries}
    print(format_table(table))
    print()
    for note in files.skipped:
        print(f"not shown: {note}")
    print(f"wrote the report of {len(files.entries)} campaign(s) to {files.out_dir}:")
    for path in (files.html, *files.figures, files.json):
        print(f"  {path}")
    return 0
