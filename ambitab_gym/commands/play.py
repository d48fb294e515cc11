"""``ambitab-gym play ENV_ID``: be the asker - type questions, read the oracle's answers (the
corpus's deterministic oracle, or ``--oracle llm``), then type SQL (``--solver none``) or let a
solver write it, and see the verdict; ``--reveal`` then shows the credits and the episode's
precision and recall."""

from __future__ import annotations

import argparse
import secrets
import sys

from ambitab_gym import defaults
from ambitab_gym.commands._args import check_component, component_help, non_negative_int
from ambitab_gym.commands.evaluate import check_llm_server, llm_client_from, oracle_options
from ambitab_gym.commands.llm_options import add_llm_arguments, add_oracle_arguments

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``play`` subcommand."""
    parser = subparsers.add_parser(
        "play",
        help="ask the clarifying questions yourself, in the terminal",
        description="Play one episode as the asker: the task is shown, you type questions and "
        "read the oracle's answers, /stop ends asking; then a solver writes the SQL, or with "
        "--solver none you type it, and the verdict is shown. /help lists the commands.",
    )
    parser.add_argument(
        "env_id", metavar="ENV_ID", help="env id (AmbiTab-Bird-v0), corpus name or folder"
    )
    parser.add_argument(
        "--solver",
        default=defaults.SOLVER,
        help=component_help("solver", default=defaults.SOLVER)
        + "; or none to type the SQL yourself",
    )
    parser.add_argument(
        "--oracle",
        default=defaults.ORACLE,
        help=component_help("oracle", default=defaults.ORACLE, lead="who answers: "),
    )
    parser.add_argument(
        "--seed",
        type=non_negative_int,
        default=None,
        help="reset seed (draws the task; default: random)",
    )
    parser.add_argument("--record", default=None, metavar="ID", help="play this record")
    parser.add_argument(
        "--reveal",
        action="store_true",
        help="after the verdict, show the task's ambiguities, what each question was credited "
        "with, and the episode's precision and recall (never during the episode)",
    )
    parser.add_argument(
        "--split", default=None, help="draw tasks from this split only (default: every record)"
    )
    add_llm_arguments(parser)
    add_oracle_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Play one episode on stdin/stdout."""
    from ambitab_gym.corpora import CorpusNotFound
    from ambitab_gym.errors import AmbiTabError
    from ambitab_gym.play import PlaySession, make_play_env

    seed = args.seed
    if seed is None and args.record is None:
        seed = secrets.randbelow(2**31)  # shown in the banner, so the task can be replayed
    try:
        if args.solver != "none":
            check_component("solver", args.solver)
        check_component("oracle", args.oracle)
        client = llm_client_from(args)
        check_llm_server(client, args, 1, "ambitab-gym play")
        env = make_play_env(
            args.env_id,
            solver=args.solver,
            split=args.split,
            llm_client=client,
            oracle=args.oracle,
            oracle_options=oracle_options(args),
        )
    except (AmbiTabError, CorpusNotFound, ValueError, RuntimeError) as error:
        print(f"ambitab-gym play: {error}", file=sys.stderr)
        return 2
    try:
        PlaySession(env, seed=seed, record_id=args.record, reveal=args.reveal).run()
    except ValueError as error:  # an unknown --record
        print(f"ambitab-gym play: {error}", file=sys.stderr)
        return 2
    finally:
        env.close()
    return 0
