"""The ``ambitab-gym`` command.

Each subcommand lives in its own module of :mod:`ambitab_gym.commands` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` (``args -> exit status``).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import sys
from collections.abc import Sequence

import ambitab_gym.commands

__all__ = ["build_parser", "entry", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand of :mod:`ambitab_gym.commands`."""
    parser = argparse.ArgumentParser(
        prog="ambitab-gym",
        description="Conversational task disambiguation over databases: corpora, evaluation, "
        "leakage diagnostics.",
    )
    parser.add_argument("--version", action="version", version=ambitab_gym.__version__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(ambitab_gym.commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"ambitab_gym.commands.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:  # helper modules (shared options) register no command
            register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(message)s",
        stream=sys.stderr,
    )
    if args.verbose:  # every LLM call: prompt, sampling, reply, attempts, latency, tokens
        logging.getLogger("ambitab_gym.llm").setLevel(logging.DEBUG)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def entry() -> None:
    """The ``ambitab-gym`` console script and ``python -m ambitab_gym``: :func:`main` in a
    process tuned for campaigns (:func:`~ambitab_gym.evaluation.engine.tune_gc_for_campaigns`)."""
    from ambitab_gym.evaluation.engine import tune_gc_for_campaigns

    tune_gc_for_campaigns()
    try:
        status = main()
    except BrokenPipeError:  # "ambitab-gym list | head": the reader has gone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        status = 1
    sys.exit(status)


if __name__ == "__main__":  # pragma: no cover
    entry()
