"""``ambitab-gym build SOURCE --source PATH``: build a full corpus from an upstream release.

* :func:`register` - adds the ``build`` subcommand.
* :func:`run` - runs it (``args -> exit status``).

The corpus goes to ``<data home>/corpora/<name>`` unless ``--out`` says otherwise, where
``gym.make`` finds it. With ``--json`` the last line of stdout is one JSON object:
``{"corpus", "out", "records", "avts", "retained_items", "dropped": {reason: count},
"dropped_by_type"?: {type: {"items", "dropped", "share_dropped"}} (sources whose items have kinds),
"terms": {"counted_ambiguities", "in_request", "share_in_request", "origins": {origin: count}}}``
(``terms``: how many counted ambiguity terms occur in their request, and how they were derived).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["register", "run"]

_PROG = "ambitab-gym build"

_EXTRA_HELP = """
sources and what --source expects:
  ambiqt         an AmbiQT checkout (benchmark/col-synonyms/*.json); --databases: Spider's database/
  ew-bird        BIRD's dev/ or train/ folder (dev.json, dev_tables.json, dev_databases/)
  ambrosia       Ambrosia's ambrosia.csv (databases are built from its db_dump column)
  taco           the TACO-Benchmark checkout (us/, beijing/) or the repository root holding
                 it, one split folder or its data/
  bird-interact  the BIRD-Interact task JSONL (database folders beside it, or --databases)
  bird           released AmbiTab-Bird records (JSONL); --databases: BIRD's databases

every dropped item is listed with its reason in <out>/dropped.jsonl.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``build`` subcommand."""
    from ambitab_gym import registry
    from ambitab_gym.commands._args import non_negative_int, output_folder

    parser = subparsers.add_parser(
        "build",
        help="build a full corpus from an upstream dataset",
        description="Convert an upstream dataset (in its native layout) into an AmbiTab corpus "
        "folder, validate it and install it in the data home.",
        epilog=_EXTRA_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "source_name",
        metavar="SOURCE",
        choices=sorted(registry.names("converter")),
        help="upstream dataset: %(choices)s",
    )
    parser.add_argument(
        "--source", required=True, type=Path, metavar="PATH", help="the upstream release"
    )
    parser.add_argument(
        "--databases", type=Path, metavar="PATH", help="folder of the upstream databases"
    )
    parser.add_argument(
        "--out",
        type=output_folder,
        metavar="PATH",
        help="corpus folder (default: <data home>/corpora/<name>, used by gym.make)",
    )
    parser.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed of every random draw (default 0)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON (last line)")
    parser.add_argument(
        "--llm-url", metavar="URL", help="OpenAI-compatible endpoint for the model-based hooks"
    )
    parser.add_argument("--model", metavar="NAME", help="model name for --llm-url")
    parser.add_argument(
        "--llm-cache",
        type=Path,
        metavar="PATH",
        help="reply cache of the model-based hooks (SQLite, created when missing): a rebuild "
        "replays the stored replies without asking the model (docs/llm.md, 'Reproducible reruns')",
    )
    parser.add_argument(
        "--responses",
        type=Path,
        metavar="PATH",
        help="bird-interact: frozen response catalog (JSON/JSONL)",
    )
    parser.add_argument(
        "--ground-truth",
        type=Path,
        metavar="PATH",
        help="bird-interact: solutions withheld from the public task file (JSONL by instance_id)",
    )
    parser.add_argument(
        "--dialect",
        choices=["auto", "postgres", "sqlite"],
        default="auto",
        help="bird-interact: SQL dialect of the tasks (default: auto)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run a build; returns 0 on success, 1 when it failed or did not validate, 2 for a wrong
    command line (a path option naming nothing, an unreachable model server)."""
    from ambitab_gym.convert.builder import BuildReport, build_corpus, corpus_for_source
    from ambitab_gym.convert.common import BuildError, BuildOptions

    if bool(args.llm_url) != bool(args.model):
        print(f"{_PROG}: --llm-url and --model go together", file=sys.stderr)
        return 2
    for option, path in (
        ("--source", args.source and args.source.expanduser()),
        ("--databases", args.databases and args.databases.expanduser()),
        ("--responses", args.responses),
        ("--ground-truth", args.ground_truth),
    ):
        if path is not None and not path.exists():
            print(f"{_PROG}: {option} {path} does not exist", file=sys.stderr)
            return 2
    if args.llm_cache is not None:
        if not args.llm_url:
            print(f"{_PROG}: --llm-cache needs --llm-url and --model", file=sys.stderr)
            return 2
        from ambitab_gym.llm.cache import ReplyCache, ReplyCacheError

        try:
            ReplyCache(args.llm_cache).close()  # a file that is no reply cache fails here
        except ReplyCacheError as error:
            print(f"{_PROG}: {error}", file=sys.stderr)
            return 2
    if args.llm_url and (status := _check_server(args.llm_url, args.model)):
        return status
    options = BuildOptions(
        source=args.source,
        databases=args.databases,
        seed=args.seed,
        show_progress=sys.stderr.isatty() and not args.json,
        llm_url=args.llm_url,
        model=args.model,
        llm_cache=args.llm_cache,
        responses=args.responses,
        extra={
            "ground_truth": args.ground_truth,
            "dialect": args.dialect,
        },
    )
    corpus = corpus_for_source(args.source_name)
    try:
        report = build_corpus(args.source_name, options, out=args.out)
    except BuildError as error:
        report = BuildReport(corpus, None, 0, 0, 0, {}, error=str(error))
    _print(report, as_json=args.json)
    return 0 if report.ok else 1


def _check_server(url: str, model: str) -> int:
    """Pre-flight the model server of the converters' hooks before anything is read or built:
    0 when it serves ``model``, else 2 with the reason (the URL, the refused key, the models it
    serves) on stderr."""
    from ambitab_gym.commands.llm_options import preflight
    from ambitab_gym.errors import LLMServiceError
    from ambitab_gym.llm.client import LLMClient

    client = LLMClient(url, model)
    try:
        preflight([client], concurrency=1, fixed=True, prog="ambitab-gym build")
    except LLMServiceError as error:
        print(f"{_PROG}: {error}", file=sys.stderr)
        return 2
    finally:
        client.close()
    return 0


def _print(report, *, as_json: bool) -> None:
    if report.ok:
        lines = [
            f"built {report.corpus}: {report.records} records, {report.avts} AVTs "
            f"from {report.retained_items} retained items -> {report.out}"
        ]
        for reason, count in sorted(report.dropped.items()):
            lines.append(f"  dropped {count:>6}  {reason}")
        for group, counts in (report.dropped_by_type or {}).items():
            shares = ", ".join(
                f"{reason} {share:.0%}" for reason, share in counts["share_dropped"].items()
            )
            lines.append(f"  {group}: {counts['items']} items, dropped {shares or 'none'}")
        terms = report.terms or {}
        if terms.get("counted_ambiguities"):
            origins = ", ".join(f"{k} {v}" for k, v in terms["origins"].items())
            lines.append(
                f"  terms: {terms['in_request']} of {terms['counted_ambiguities']} counted "
                f"ambiguities name a phrase of the request ({origins})"
            )
        print("\n".join(lines), file=sys.stderr if as_json else sys.stdout)
    else:
        print(f"{_PROG}: {report.error}", file=sys.stderr)
        for violation in report.violations[:20]:
            print(
                f"  {violation['record_id']}: {violation['check']}: {violation['message']}",
                file=sys.stderr,
            )
        if len(report.violations) > 20:
            print(f"  ... and {len(report.violations) - 20} more", file=sys.stderr)
    if as_json:
        print(json.dumps(report.as_dict(), ensure_ascii=False))
