"""``ambitab-gym rescore RESULTS``: re-score stored campaigns from their recorded oracle routes.

Each turn answered by an LLM oracle carries its route (``labeled``/``unlabeled``/
``unanswerable``), the matcher's rationale and the response; the paper's C.3 scorer credits it
again without any model call, and the campaign's table is printed from the new credits
(evaluate campaigns like ``evaluate``, leakage campaigns like ``leakage``). The results file is
not changed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ambitab_gym.commands._args import add_bootstrap_arguments, add_campaign_filter

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``rescore`` subcommand."""
    parser = subparsers.add_parser(
        "rescore",
        help="re-score stored campaigns from their recorded oracle routes (paper C.3)",
        description="Credit every stored LLM-oracle turn again with the C.3 scorer (an exact "
        "labeled term first, otherwise registered terms and aliases found in the label, the "
        "question, the routing rationale and the response) and print each campaign's table. "
        "No model is called; the results file is not changed.",
    )
    parser.add_argument("results", metavar="RESULTS", type=Path, help="DuckDB results file")
    add_campaign_filter(parser)
    add_bootstrap_arguments(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object as the last line: campaign id -> its --json object",
    )
    parser.set_defaults(func=run)


def _select(campaigns: list[dict], wanted: list[str] | None) -> list[dict]:
    if not wanted:
        return campaigns
    chosen = []
    for prefix in wanted:
        hits = [c for c in campaigns if c["campaign_id"].startswith(prefix)]
        if len(hits) != 1:
            raise ValueError(f"campaign {prefix!r} matches {len(hits)} campaigns")
        chosen.append(hits[0])
    return chosen


def run(args: argparse.Namespace) -> int:
    """Re-score and print; returns the exit status."""
    from ambitab_gym.diagnostics.estimates import format_leakage_table, leakage_report
    from ambitab_gym.evaluation.rescore import rescore_campaign
    from ambitab_gym.evaluation.store import ResultsStore
    from ambitab_gym.evaluation.summary import format_table, summarize_campaign

    if not args.results.exists():
        print(f"ambitab-gym rescore: no results file {args.results}", file=sys.stderr)
        return 2
    out: dict[str, dict] = {}
    try:
        with ResultsStore(args.results) as store:
            campaigns = _select(store.campaigns(), args.campaign)
            for campaign in campaigns:
                cid, kind = campaign["campaign_id"], campaign["kind"]
                rows = rescore_campaign(store, cid)
                rescored = sum(r["rescored_turns"] for r in rows)
                changed = sum(r["changed_turns"] for r in rows)
                label = f"{campaign['corpus']} ({cid[:8]})"
                if kind == "leakage":
                    links = [tuple(p) for p in campaign["config"].get("replacement_links", [])]
                    report = leakage_report(
                        rows,
                        replacement_links=links,
                        resamples=args.resamples,
                        seed=args.bootstrap_seed,
                    )
                    oracle = str(campaign["config"].get("oracle", ""))
                    print(format_leakage_table({(oracle, label): report}))
                    result = report.to_json()
                else:
                    summary = summarize_campaign(rows)
                    print(format_table({label: summary}))
                    result = summary.to_json()
                print(
                    f"{kind} campaign {cid}: {len(rows)} episodes, {rescored} routed turns "
                    f"re-scored, {changed} credit(s) changed\n"
                )
                out[cid] = {**result, "rescored_turns": rescored, "changed_turns": changed}
    except (ValueError, RuntimeError, KeyError) as error:
        print(f"ambitab-gym rescore: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out))
    return 0
