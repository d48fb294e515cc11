"""``ambitab-gym export RESULTS --jsonl``: the stored episodes as JSON Lines.

One JSON object per episode of the results file's campaigns (or those named with
``--campaign``), with the stored row fields (``docs/cli.md`` lists them), written to ``--out``
(default: RESULTS with the suffix ``.jsonl``; ``-`` for standard output). The file loads with
``ambitab_gym.evaluation.export.load_dataset`` or ``datasets.load_dataset("json", ...)``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ambitab_gym.commands._args import add_campaign_filter, output_file

__all__ = ["register", "run"]


def _out(text: str) -> str | Path:
    """``-`` (standard output) or a file path checked like every other output file."""
    return "-" if text == "-" else output_file(text)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``export`` subcommand."""
    parser = subparsers.add_parser(
        "export",
        help="export stored episodes as JSON Lines (one object per episode)",
        description="Write one JSON object per stored episode of a results file (every "
        "campaign, or those named with --campaign): the stored row fields, with the dialogue "
        "and timings as JSON. Load it with ambitab_gym.evaluation.export.load_dataset (the "
        "datasets extra) or any JSON Lines reader. The rows are analyst data: the dialogue "
        "keeps the oracle's credits.",
    )
    parser.add_argument("results", metavar="RESULTS", type=Path, help="DuckDB results file")
    parser.add_argument(
        "--jsonl",
        action="store_true",
        help="write JSON Lines (the default and, for now, the only format)",
    )
    parser.add_argument(
        "--out",
        type=_out,
        default=None,
        metavar="PATH",
        help="the file to write, '-' for standard output (default: RESULTS with the suffix "
        ".jsonl); missing folders are created",
    )
    add_campaign_filter(parser)
    parser.add_argument(
        "--with-campaign",
        action="store_true",
        help="add each episode's campaign (kind, corpus, configuration, corpus origin and "
        "checksum, package version) as the field 'campaign'",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Export; print what was written (to standard error when the rows go to standard output)."""
    from ambitab_gym.evaluation.export import export_jsonl
    from ambitab_gym.evaluation.store import ResultsFileError

    results: Path = args.results
    if not results.is_file():
        print(f"ambitab-gym export: no results file at {results}", file=sys.stderr)
        return 2
    out = args.out if args.out is not None else results.with_suffix(".jsonl")
    if out != "-" and Path(out).resolve() == results.resolve():
        print(f"ambitab-gym export: --out {out} is the results file itself", file=sys.stderr)
        return 2
    try:
        summary = export_jsonl(
            results,
            sys.stdout if out == "-" else out,
            args.campaign,
            with_campaign=args.with_campaign,
        )
    except (ResultsFileError, ValueError, OSError) as error:
        print(f"ambitab-gym export: {error}", file=sys.stderr)
        return 2
    where = "standard output" if summary.path is None else str(summary.path)
    print(
        f"wrote {summary.episodes} episode(s) of {len(summary.campaigns)} campaign(s) to {where}",
        file=sys.stderr if summary.path is None else sys.stdout,
    )
    if not summary.campaigns:
        print(f"note: {results} holds no campaign", file=sys.stderr)
    return 0
