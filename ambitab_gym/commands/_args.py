"""Argument types shared by the commands: argparse reports a bad value as a usage error
(``ambitab-gym evaluate: error: argument --limit: ...``, exit status 2) before anything runs.

* :func:`positive_int` - counts that must be at least 1 (``--limit``, ``--seeds``, ...).
* :func:`non_negative_int` - seeds (NumPy refuses negative ones).
* :func:`output_file` / :func:`output_folder` - paths the command will write: missing parent
  folders are created when the command writes, so only what cannot work is refused here (a
  folder where a file is expected, a file where a folder is expected, no write permission).
* :func:`component_help`, :func:`check_component` - the ``--help`` text listing the names of
  :mod:`ambitab_gym.registry`, and the check of a name (an unknown one lists the valid ones).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ambitab_gym import defaults, registry
from ambitab_gym.errors import UnknownComponent

__all__ = [
    "check_component",
    "component_help",
    "non_negative_int",
    "output_file",
    "output_folder",
    "positive_int",
]


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None


def positive_int(text: str) -> int:
    """A whole number of at least 1.

    >>> positive_int("3")
    3
    >>> positive_int("-3")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be at least 1, not -3
    """
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def non_negative_int(text: str) -> int:
    """A whole number of at least 0.

    >>> non_negative_int("0")
    0
    """
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _writable_ancestor(path: Path) -> None:
    """Refuse a path whose nearest existing ancestor is not a folder this user may write."""
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{path}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{path}: no permission to write in {parent}")


def output_file(text: str) -> Path:
    """A file the command will write (its missing parent folders are created then).

    >>> import tempfile
    >>> output_file(tempfile.gettempdir())
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: ... is a folder; give a file name
    """
    path = Path(text).expanduser()
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} is a folder; give a file name")
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"{path}: no permission to write it")
    _writable_ancestor(path)
    return path


def output_folder(text: str) -> Path:
    """A folder the command will write into (created when missing)."""
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} is a file; give a folder")
    if path.is_dir():
        if not os.access(path, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"{path}: no permission to write in it")
        return path
    _writable_ancestor(path)
    return path


def check_component(kind: str, name: str) -> str:
    """``name`` when it is a registered ``kind`` (``llm:STRATEGY`` patterns included) or, for
    askers, solvers and oracles, an import path ``module:callable``.

    Commands call it first thing in ``run``, so a wrong name fails before anything runs, with
    the command's usual error line and exit status 2.

    Raises:
        UnknownComponent: listing the valid names.

    >>> check_component("solver", "dialogue-sql")
    'dialogue-sql'
    >>> check_component("solver", "telepathy")
    Traceback (most recent call last):
    ...
    ambitab_gym.errors.UnknownComponent: unknown solver 'telepathy'; use one of: interpretation, dialogue-sql, dialogue-sql-blind, llm (or an import path 'module:callable')
    """
    try:
        registry.get(kind, name)
    except UnknownComponent:
        importable = kind in ("asker", "solver", "oracle")
        if not (importable and ":" in name and not name.startswith("llm:")):
            raise
    return name


def component_help(kind: str, *, default: str | None = None, lead: str = "") -> str:
    """A ``--help`` text listing the registry's names of ``kind`` (never written by hand, so
    it cannot drift from what the command accepts).

    >>> component_help("solver", default="interpretation")
    'interpretation, dialogue-sql, dialogue-sql-blind, llm or module:callable (default: interpretation)'
    """
    text = lead + registry.choices_help(kind)
    patterns = [c for c in registry.components(kind) if c.parameter_kind is not None]
    for entry in patterns:
        placeholder = entry.name.split(":", 1)[1]
        text += f"; {placeholder}: {', '.join(registry.names(entry.parameter_kind))}"
    if default is not None:
        text += f" (default: {default})"
    return text


def add_bootstrap_arguments(parser: argparse.ArgumentParser) -> None:
    """``--resamples`` and ``--bootstrap-seed``: the AVT-cluster bootstrap of the leakage
    diagnostics (``leakage`` and ``rescore``)."""
    parser.add_argument(
        "--resamples",
        type=positive_int,
        default=defaults.BOOTSTRAP_RESAMPLES,
        help=f"bootstrap resamples (default {defaults.BOOTSTRAP_RESAMPLES})",
    )
    parser.add_argument(
        "--bootstrap-seed",
        type=non_negative_int,
        default=defaults.BOOTSTRAP_SEED,
        help=f"bootstrap seed (default {defaults.BOOTSTRAP_SEED})",
    )
