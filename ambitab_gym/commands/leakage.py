"""``ambitab-gym leakage``: the four leakage diagnostics of an oracle, printed like paper Table 14."""

from __future__ import annotations

import argparse
import json
import sys

from ambitab_gym import defaults
from ambitab_gym.commands._args import (
    add_bootstrap_arguments,
    add_campaign_arguments,
    add_concurrency_arguments,
    add_executor_arguments,
    answer_reading_solvers,
    check_component,
    component_help,
    either,
    non_negative_int,
    positive_int,
    results_file,
    solver_reads_answers,
)
from ambitab_gym.commands.evaluate import add_llm_options

__all__ = ["register", "solver_warning"]


def solver_warning(solver: str) -> str | None:
    """One line for a solver that declares it does not read the answers (``interpretation``):
    the checks that need one cannot show a response leak with it. None for a solver that reads
    them or declares nothing (:func:`ambitab_gym.policies.base.reads_answers`).

    >>> print(solver_warning("interpretation"))  # doctest: +NORMALIZE_WHITESPACE
    warning: solver 'interpretation' does not read what the answers say beyond the task's
    stored answer texts, so dJ_resp and dJ_full cannot show a response leak with it; use
    --solver dialogue-sql, dialogue-sql-blind or llm
    >>> solver_warning("dialogue-sql") is None
    True
    """
    from ambitab_gym.diagnostics.estimates import DIAGNOSTICS

    if solver_reads_answers(solver) is not False:
        return None
    checks = [d.label for d in DIAGNOSTICS if d.needs_answer_reader]
    return (
        f"warning: solver {solver!r} does not read what the answers say beyond the task's "
        f"stored answer texts, so {either(checks, 'and')} cannot show a response leak with "
        f"it; use --solver {either(answer_reading_solvers())}"
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "leakage",
        help="leakage diagnostics of an oracle (dJ_resp, dRec_spec^Q, dJ_full, dRec_none)",
        description="Run the leakage-diagnostic conditions (the asker under the oracle and under "
        "the hybrid oracle, the specification-randomized asker, the adversarial full and "
        "generic probes) over a corpus and seeds; store every episode; print the four "
        "diagnostics in percentage points with 95%% AVT-cluster bootstrap intervals.",
    )
    parser.add_argument(
        "env_id", metavar="ENV_ID", help="env id (AmbiTab-Bird-v0), corpus name or folder"
    )
    parser.add_argument(
        "--oracle",
        default=defaults.ORACLE,
        help=component_help("oracle", default=defaults.ORACLE, lead="the oracle under study: "),
    )
    parser.add_argument(
        "--asker",
        required=True,
        help=component_help("asker", lead="the evaluated asker: "),
    )
    parser.add_argument(
        "--solver",
        default=defaults.SOLVER,
        help=component_help("solver", default=defaults.SOLVER),
    )
    parser.add_argument("--seeds", type=positive_int, default=1, help="number of seeds (0..N-1)")
    parser.add_argument("--split", default=None, help="a split of the corpus (default: all)")
    parser.add_argument("--limit", type=positive_int, default=None, help="only the first N records")
    parser.add_argument(
        "--budget-slack",
        type=positive_int,
        default=defaults.BUDGET_SLACK,
        help=f"decisions beyond m (default {defaults.BUDGET_SLACK})",
    )
    parser.add_argument(
        "--spec-seed",
        type=non_negative_int,
        default=defaults.SPEC_SEED,
        help="seed of the specification-randomization replacement map "
        f"(default {defaults.SPEC_SEED})",
    )
    add_bootstrap_arguments(parser)
    add_campaign_arguments(parser)
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
    parser.add_argument(
        "--response-guard",
        action="store_true",
        help="redact oracle answers that reveal SQL before the agent sees them "
        "(wrappers.ResponseGuard; credits unchanged, originals kept in the results)",
    )
    add_llm_options(parser)
    add_executor_arguments(parser)
    parser.set_defaults(func=run)


def _points(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def run(args: argparse.Namespace) -> int:
    from ambitab_gym.commands.evaluate import (
        campaign_outcome,
        check_llm_server,
        llm_client_from,
        llm_identity,
        llm_usage,
        run_options,
        seeds_note_for,
    )
    from ambitab_gym.corpora import CorpusNotFound, load_corpus
    from ambitab_gym.diagnostics import LeakageConfig, format_leakage_table, run_leakage
    from ambitab_gym.diagnostics.estimates import PROBE_RECALL_LIMIT
    from ambitab_gym.errors import AmbiTabError
    from ambitab_gym.evaluation import ResultsStore
    from ambitab_gym.evaluation.identity import identity_of

    prog = "ambitab-gym leakage"

    if args.seeds < 1:
        print("ambitab-gym leakage: --seeds must be at least 1", file=sys.stderr)
        return 2
    if args.resamples < 1:
        print("ambitab-gym leakage: --resamples must be at least 1", file=sys.stderr)
        return 2
    try:
        for kind in ("asker", "solver", "oracle"):
            check_component(kind, getattr(args, kind))
        corpus = load_corpus(args.env_id)
        identity = identity_of(corpus)
        print(identity.describe(), file=sys.stderr)
        config = LeakageConfig(
            corpus=args.env_id,
            asker=args.asker,
            oracle=args.oracle,
            solver=args.solver,
            seeds=tuple(range(args.seeds)),
            split=args.split,
            budget_slack=args.budget_slack,
            limit=args.limit,
            spec_seed=args.spec_seed,
            llm=llm_identity(args),
            response_guard=args.response_guard,
        )
        client = llm_client_from(args)
        concurrency = args.concurrency or defaults.concurrency_for(llm=client is not None)
        concurrency = check_llm_server(client, args, concurrency, prog)
        results = results_file(args)
        print(f"results: {results}", file=sys.stderr)
        campaign_id = identity.campaign_id(config.campaign_id)
        with ResultsStore(results) as store:
            report = run_leakage(
                config,
                store,
                concurrency=concurrency,
                resamples=args.resamples,
                bootstrap_seed=args.bootstrap_seed,
                **run_options(args, client, prog),
            )
            rows = store.episodes(campaign_id)
    except (AmbiTabError, CorpusNotFound, ValueError, RuntimeError, OSError) as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2
    from ambitab_gym.evaluation.summary import revealing_turns, reveals_sql_warning

    revealing = [revealing_turns(row) for row in rows]
    warning = reveals_sql_warning(
        sum(1 for n in revealing if n), sum(revealing), guarded=args.response_guard
    )
    if warning:
        print(f"{prog}: {warning}", file=sys.stderr)
    warning = solver_warning(args.solver)
    if warning:
        print(f"{prog}: {warning}", file=sys.stderr)
    label = corpus.name if not args.split else f"{corpus.name}/{args.split}"
    print(f"asker={args.asker}  solver={args.solver}  oracle={args.oracle}")
    print(format_leakage_table({(args.oracle, label): report}))
    print(
        "\nPercentage points: mean ± SD over seeds [95% percentile bootstrap interval, "
        f"{args.resamples} resamples of AVT clusters; dRec_spec^Q: "
        f"{report.diagnostics['d_rec_spec'].interval.units} cluster(s) linked by shared "
        "replacements]."
    )
    terms = report.reference_terms
    print(
        "Theorem 1 (part 2): dRec_spec^Q = Leak_Rec(pi^Q; match) + Rec(pi^Q; O*): "
        f"{_points(report.diagnostics['d_rec_spec'].mean)} = "
        f"{_points(terms['leak_rec_spec'].mean)} + {_points(terms['rec_spec_reference'].mean)}"
    )
    checks = report.checks
    verdict = {True: "ok", False: "NOT MET", None: "not run"}[report.reference_ok]
    print(
        "Reference runs (Definition 7): full^adv recall "
        f"{_points(checks['full_adv_recall'])}, precision {_points(checks['full_adv_precision'])}; "
        f"none^adv recall {_points(checks['none_adv_recall'])}; restatement recall "
        f"{_points(checks['restatement_recall'])}, shotgun recall "
        f"{_points(checks['shotgun_recall'])} (at most {_points(PROBE_RECALL_LIMIT)}) - {verdict}"
    )
    from ambitab_gym.evaluation.summary import token_totals

    prompt_tokens, completion_tokens, tokens_by_role = token_totals(rows)
    print(identity.describe())
    print(
        f"{report.episodes} episodes, {len(config.seeds)} seed(s), LLM tokens "
        f"{prompt_tokens}+{completion_tokens}; results in {results} (campaign {campaign_id})"
    )
    note = seeds_note_for(args)
    if note:
        print(note)
    if report.errors:
        print("errors: " + ", ".join(f"{k}: {v}" for k, v in sorted(report.errors.items())))
    usage = llm_usage(client)
    if usage is not None:
        print(usage[0])
    status = campaign_outcome(report.errors, report.episodes, args, prog)
    if args.json:
        llm = (
            {
                "llm_usage": usage[1],
                "tokens": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "by_role": tokens_by_role,
                },
            }
            if usage
            else {}
        )
        print(json.dumps({**report.to_json(), **llm}))
    return status
