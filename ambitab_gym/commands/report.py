"""``ambitab-gym report RESULTS``: figures (paper Figure 3 a-c, Figure 4) and an HTML page from a
results file.

Shows every evaluate and leakage campaign of the file (or those named with ``--campaign``), one
group per corpus, the oracle-response audit's shares and an episode browser; campaigns of other
kinds are listed as not shown.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ambitab_gym.commands._args import add_campaign_filter, output_folder, positive_int

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``report`` subcommand."""
    parser = subparsers.add_parser(
        "report",
        help="draw figures and an HTML page from a results file",
        description="Draw success rate (without asker, with asker, full disambiguation), "
        "precision and recall per corpus, and the leakage diagnostics with their bootstrap "
        "intervals, as PNG (200 dpi) and PDF figures, and write one self-contained HTML page "
        "with the figures, the tables (mean ± SD over seeds), the audited share of oracle "
        "answers and a browser of every stored episode.",
    )
    parser.add_argument("results", metavar="RESULTS", type=Path, help="DuckDB results file")
    parser.add_argument(
        "--out",
        type=output_folder,
        default=None,
        help="output folder (default: RESULTS without suffix + '-report')",
    )
    add_campaign_filter(parser)
    parser.add_argument(
        "--dpi", type=positive_int, default=200, help="PNG resolution (default 200)"
    )
    parser.add_argument(
        "--no-figures",
        action="store_true",
        help="write the HTML tables only (no matplotlib needed)",
    )
    parser.add_argument(
        "--no-browser",
        action="store_true",
        help="leave the episode browser out of the page",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the report; print the table and where the files went."""
    from ambitab_gym.diagnostics import format_leakage_table, stored_leakage_report
    from ambitab_gym.evaluation import format_table
    from ambitab_gym.evaluation.report import MissingPlotDependency, write_report

    try:
        files = write_report(
            args.results,
            args.out,
            campaign_ids=args.campaign,
            figures=not args.no_figures,
            dpi=args.dpi,
            leakage=stored_leakage_report,
            browser=not args.no_browser,
        )
    except (OSError, ValueError, RuntimeError) as error:
        hint = " (or pass --no-figures)" if isinstance(error, MissingPlotDependency) else ""
        print(f"ambitab-gym report: {error}{hint}", file=sys.stderr)
        return 2
    if files.entries:
        print(format_table({f"{e.group} {e.label}": e.summary for e in files.entries}))
        print()
    if files.leakage:
        print(format_leakage_table({(e.oracle, e.dataset): e.report for e in files.leakage}))
        print()
    for row in files.audit:
        print(
            f"audit: {row['oracle']} on {row['corpus']}: {row['audited']} of {row['items']} "
            "credited answers marked"
        )
    for note in files.skipped:
        print(f"not shown: {note}")
    shown = len(files.entries) + len(files.leakage)
    browsed = f", {files.episodes} episodes in the browser" if files.episodes else ""
    print(f"wrote the report of {shown} campaign(s){browsed} to {files.out_dir}:")
    for path in (files.html, *files.figures, files.json):
        print(f"  {path}")
    return 0
