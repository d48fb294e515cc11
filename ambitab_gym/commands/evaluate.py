"""``ambitab-gym evaluate``: run the none / asker / full conditions and print paper Table 8."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ambitab_gym import defaults
from ambitab_gym.commands._args import (
    add_campaign_arguments,
    add_concurrency_arguments,
    add_executor_arguments,
    check_component,
    component_help,
    executor_from_args,
    output_file,
    positive_int,
    results_file,
)

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="evaluate an asker against no and full disambiguation",
        description="Run the no-disambiguation, evaluated-asker and full-asker conditions over "
        "a corpus split and seeds (one campaign per corpus given); store every episode; print "
        "SR, precision, recall and F1.",
    )
    parser.add_argument(
        "env_id",
        metavar="ENV_ID",
        nargs="+",
        help="env id (AmbiTab-Bird-v0), corpus name or folder; several run one campaign each "
        "into the same results file and print one table",
    )
    parser.add_argument(
        "--asker",
        default=defaults.ASKER,
        help=component_help("asker", default=defaults.ASKER),
    )
    parser.add_argument(
        "--solver",
        default=defaults.SOLVER,
        help=component_help("solver", default=defaults.SOLVER),
    )
    parser.add_argument(
        "--oracle",
        default=defaults.ORACLE,
        help=component_help("oracle", default=defaults.ORACLE),
    )
    parser.add_argument("--seeds", type=positive_int, default=1, help="number of seeds (0..N-1)")
    parser.add_argument(
        "--split", default=None, help="a split of the corpus (default: all records)"
    )
    parser.add_argument("--limit", type=positive_int, default=None, help="only the first N records")
    parser.add_argument(
        "--budget-slack",
        type=positive_int,
        default=defaults.BUDGET_SLACK,
        help=f"decisions beyond m (default {defaults.BUDGET_SLACK})",
    )
    add_campaign_arguments(parser)
    parser.add_argument(
        "--csv",
        type=output_file,
        default=None,
        help="also export this campaign's episodes to CSV (missing folders are created)",
    )
    add_concurrency_arguments(parser)
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object as the last line"
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress output (default: a bar on a terminal, else a line every "
        "--progress-interval seconds)",
    )
    add_llm_options(parser)
    add_executor_arguments(parser)
    parser.set_defaults(func=run)


def add_llm_options(parser: argparse.ArgumentParser) -> None:
    """The LLM server options and the LLM oracle's access options (shared with ``leakage``)."""
    from ambitab_gym.commands.llm_options import add_llm_arguments, add_oracle_arguments

    add_llm_arguments(parser)
    add_oracle_arguments(parser)


def oracle_options(args: argparse.Namespace) -> dict:
    """The LLM oracle's access options given on the command line."""
    if getattr(args, "oracle", None) != "llm":
        return {}
    from ambitab_gym.commands.llm_options import oracle_options_from_args

    return oracle_options_from_args(args)


def wants_llm(args: argparse.Namespace) -> bool:
    """Whether a part named on the command line is an LLM one (``llm:STRATEGY``, ``llm``)."""
    asker = str(getattr(args, "asker", None) or "")
    return (
        asker == "llm"
        or asker.startswith("llm:")
        or getattr(args, "solver", None) == "llm"
        or getattr(args, "oracle", None) == "llm"
    )


def _env_defaults(args: argparse.Namespace) -> None:
    """With an LLM part, unset --llm-url/--model come from OPENAI_BASE_URL/AMBITAB_LLM_MODEL."""
    if wants_llm(args):
        from ambitab_gym.commands.llm_options import apply_env_defaults

        apply_env_defaults(args)


def llm_client_from(args: argparse.Namespace):
    """The LLM client named by --llm-url/--model (or their environment variables), or None."""
    _env_defaults(args)
    if not getattr(args, "llm_url", None):
        return None
    from ambitab_gym.commands.llm_options import client_from_args

    return client_from_args(args)


def check_llm_server(client, args: argparse.Namespace, concurrency: int, prog: str) -> int:
    """Pre-flight check of the LLM server before anything runs; returns the concurrency to use
    (fitted to a llama.cpp server's slots unless --concurrency was given).

    Every LLM part of a campaign (asker, solver, the oracle's matcher and responder) talks to
    the one ``--llm-url`` server, so checking it checks them all. An LLM part named without a
    server fails here too, before the results file is touched.

    Raises:
        UsageError: an LLM part without a server.
        LLMError: the server failed the check (unreachable - the message names the URL -, key
            refused, model not served).
    """
    if client is None:
        if wants_llm(args):
            from ambitab_gym.errors import UsageError

            parts = [
                f"--{kind} {getattr(args, kind)}"
                for kind in ("asker", "solver", "oracle")
                if str(getattr(args, kind, "") or "").split(":")[0] == "llm"
            ]
            raise UsageError(
                f"{', '.join(parts)} needs an LLM server: pass --llm-url and --model (or set "
                "OPENAI_BASE_URL and AMBITAB_LLM_MODEL)"
            )
        return concurrency
    from ambitab_gym.commands.llm_options import preflight, reproducibility_note

    try:
        concurrency = preflight(
            [client], concurrency=concurrency, fixed=args.concurrency is not None, prog=prog
        )
    except Exception:
        client.close()
        raise
    note = reproducibility_note([client])
    if note:
        print(f"{prog}: {note}", file=sys.stderr)
    return concurrency


def llm_identity(args: argparse.Namespace) -> dict:
    """What identifies the LLM setup of a campaign (part of its id, so changes start afresh)."""
    _env_defaults(args)
    if not getattr(args, "llm_url", None):
        return {}
    from ambitab_gym.commands.llm_options import sampling_from_args

    keys = ("llm_url", "model", "no_thinking")
    return {
        **{k: getattr(args, k, None) for k in keys},
        # every role's temperature, top_p, top_k, max_tokens and seed (docs/llm.md, "Sampling")
        "sampling": sampling_from_args(args).to_dict(),
        "oracle_options": oracle_options(args),
    }


def llm_usage(client: Any) -> tuple[str, dict] | None:
    """The campaign's LLM calls per role: a printed line and its JSON (None without LLM)."""
    if client is None:
        return None
    from ambitab_gym.llm.usage import format_usage

    by_role = client.usage_by_role
    return format_usage(by_role), {role: usage.to_dict() for role, usage in by_role.items()}


def run_options(args: argparse.Namespace, client: Any, prog: str) -> dict[str, Any]:
    """The keyword arguments of ``run_campaign`` and ``run_leakage`` that the campaign options
    of ``evaluate`` and ``leakage`` set (all but the configuration, store and concurrency)."""
    return {
        "llm_client": client,
        "progress": not args.no_progress,
        "oracle_options": oracle_options(args),
        "executor": executor_from_args(args, client, prog=prog),
        "retry_errors": args.retry_errors,
        "new_campaign": args.new_campaign,
        "progress_interval": args.progress_interval,
        "abort_after": args.abort_after,
        "start_interval_s": args.start_interval,
    }


def campaign_outcome(
    summary_errors: dict, episodes: int, args: argparse.Namespace, prog: str
) -> int:
    """Exit status 1 with the failure summary on stderr when too many episodes errored."""
    from ambitab_gym.evaluation.summary import error_rate_message

    message = error_rate_message(summary_errors, episodes, args.max_error_rate)
    if message is None:
        return 0
    print(f"{prog}: FAILED: {message}", file=sys.stderr)
    return 1


def seeds_note_for(args: argparse.Namespace) -> str | None:
    """The note for ``--seeds N > 1`` over components no seed can vary (None otherwise)."""
    from ambitab_gym.evaluation.engine import seeds_can_vary
    from ambitab_gym.evaluation.summary import seeds_note

    parts = [(kind, getattr(args, kind)) for kind in ("asker", "solver", "oracle")]
    return seeds_note(args.seeds, can_vary=seeds_can_vary(parts))


def run(args: argparse.Namespace) -> int:
    from ambitab_gym.corpora import CorpusNotFound, load_corpus
    from ambitab_gym.errors import AmbiTabError
    from ambitab_gym.evaluation import CampaignConfig, ResultsStore, format_table, run_campaign
    from ambitab_gym.evaluation.identity import identity_of
    from ambitab_gym.evaluation.summary import reveals_sql_warning

    prog = "ambitab-gym evaluate"
    names = list(dict.fromkeys(args.env_id))
    runs: list[tuple[str, Any, Any]] = []  # (table label, config, summary) per corpus
    try:
        for kind in ("asker", "solver", "oracle"):
            check_component(kind, getattr(args, kind))
        corpora = [load_corpus(name) for name in names]  # every name checked before any run
        client = llm_client_from(args)
        concurrency = args.concurrency or defaults.concurrency_for(llm=client is not None)
        concurrency = check_llm_server(client, args, concurrency, prog)
        results = results_file(args)
        print(f"results: {results}", file=sys.stderr)
        with ResultsStore(results) as store:
            for name, corpus in zip(names, corpora, strict=True):
                print(identity_of(corpus).describe(), file=sys.stderr)
                config = CampaignConfig(
                    corpus=name,
                    asker=args.asker,
                    solver=args.solver,
                    oracle=args.oracle,
                    seeds=tuple(range(args.seeds)),
                    split=args.split,
                    budget_slack=args.budget_slack,
                    limit=args.limit,
                    llm=llm_identity(args),
                )
                summary = run_campaign(
                    config, store, concurrency=concurrency, **run_options(args, client, prog)
                )
                if args.csv:
                    path = _csv_path(args.csv, corpus.name, len(names), len(runs))
                    count = store.export_csv(path, summary.campaign_id)
                    print(f"wrote {count} episodes to {path}", file=sys.stderr)
                label = corpus.name if not args.split else f"{corpus.name}/{args.split}"
                if any(label == seen for seen, _, _ in runs):
                    label = f"{label} ({name})"  # two folders of one corpus: tell them apart
                runs.append((label, config, summary))
    except (AmbiTabError, CorpusNotFound, ValueError, RuntimeError, OSError) as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2
    for _, _, summary in runs:
        warning = reveals_sql_warning(summary.reveals_sql_episodes, summary.reveals_sql_answers)
        if warning:
            print(f"{prog}: {warning}", file=sys.stderr)
    print(f"asker={args.asker}  solver={args.solver}  oracle={args.oracle}")
    print(format_table({label: summary for label, _, summary in runs}))
    for _, config, summary in runs:
        identity = summary.corpus
        print(
            f"\ncorpus {identity['corpus']} ({identity['origin']}, {identity['path']}, checksum "
            f"{identity['checksum'][:12]}), ambitab-gym {identity['version']}"
        )
        print(
            f"{summary.episodes} episodes, {len(config.seeds)} seed(s); results in {results} "
            f"(campaign {summary.campaign_id})"
        )
    note = seeds_note_for(args)
    if note:
        print(note)
    for label, _, summary in runs:
        prefix = f"{label}: " if len(runs) > 1 else ""
        if summary.errors:
            errors = ", ".join(f"{k}: {v}" for k, v in sorted(summary.errors.items()))
            print(f"{prefix}errors: {errors}")
        for condition, reasons in summary.verdict_reasons.items():
            counts = ", ".join(f"{reason} {count}" for reason, count in reasons.items())
            print(f"{prefix}verdict reasons ({condition}): {counts}")
    usage = llm_usage(client)
    if usage is not None:
        print(usage[0])
    statuses = [campaign_outcome(s.errors, s.episodes, args, prog) for _, _, s in runs]
    status = max(statuses)
    if args.json:
        rows = [
            {**summary.to_json(), "results": str(results), "failed": failed != 0}
            for (_, _, summary), failed in zip(runs, statuses, strict=True)
        ]
        extra = {"llm_usage": usage[1]} if usage else {}
        if len(rows) == 1:
            print(json.dumps({**rows[0], **extra}))
        else:
            print(json.dumps({"campaigns": rows, "failed": status != 0, **extra}))
    return status


def _csv_path(path: Path, corpus: str, corpora: int, index: int) -> Path:
    """``--csv PATH`` for one corpus; with several, one file each: ``<stem>.<n>-<corpus>``
    (``n`` counts from 1 in the order given)."""
    path = Path(path)
    if corpora == 1:
        return path
    return path.with_name(f"{path.stem}.{index + 1}-{corpus}{path.suffix}")
