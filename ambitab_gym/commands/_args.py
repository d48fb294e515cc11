"""Argument types shared by the commands: argparse reports a bad value as a usage error
(``ambitab-gym evaluate: error: argument --limit: ...``, exit status 2) before anything runs.

* :func:`positive_int` - counts that must be at least 1 (``--limit``, ``--seeds``, ...).
* :func:`non_negative_int` - seeds (NumPy refuses negative ones).
* :func:`output_file` / :func:`output_folder` - paths the command will write: missing parent
  folders are created when the command writes, so only what cannot work is refused here (a
  folder where a file is expected, a file where a folder is expected, no write permission).
* :func:`component_help`, :func:`check_component` - the ``--help`` text listing the names of
  :mod:`ambitab_gym.registry`, and the check of a name (an unknown one lists the valid ones).
* :func:`solver_reads_answers`, :func:`answer_reading_solvers` - whether a solver reads the
  answers, as it declares (``leakage`` warns, ``list --components`` says which checks need one).
* :func:`share` - a share such as ``--max-error-rate`` (``0.1`` or ``10%``).
* :func:`default_results_file`, :func:`add_campaign_arguments`, :func:`results_file` - the
  campaign options of ``evaluate`` and ``leakage``: ``--results`` (default: in the data home),
  ``--max-error-rate``, ``--abort-after``, ``--retry-errors``, ``--new-campaign``,
  ``--progress-interval``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

from ambitab_gym import defaults, registry
from ambitab_gym.corpora.home import data_home
from ambitab_gym.errors import ConfigurationError, UnknownComponent, UsageError

__all__ = [
    "add_executor_arguments",
    "add_campaign_arguments",
    "add_concurrency_arguments",
    "add_campaign_filter",
    "answer_reading_solvers",
    "check_component",
    "component_help",
    "either",
    "executor_from_args",
    "default_results_file",
    "non_negative_float",
    "non_negative_int",
    "output_file",
    "output_folder",
    "positive_int",
    "positive_float",
    "results_file",
    "share",
    "solver_reads_answers",
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


def share(text: str) -> float:
    """A share between 0 and 1, written as a fraction or a percentage.

    >>> share("0.1"), share("25%"), share("0")
    (0.1, 0.25, 0.0)
    >>> share("1.5")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected a share between 0 and 1 (or 0% to 100%), not '1.5'
    """
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(
            f"expected a share between 0 and 1 (or 0% to 100%), not {text!r}"
        )
    return value


def non_negative_float(text: str) -> float:
    """A number, 0 or more.

    >>> non_negative_float("0.0004"), non_negative_float("0")
    (0.0004, 0.0)
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def positive_float(text: str) -> float:
    """A number above 0.

    >>> positive_float("0.5")
    0.5
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
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


def solver_reads_answers(name: str) -> bool | None:
    """What the solver ``name`` (a registered name or ``module:callable``) declares about reading
    the oracle's answers (:func:`ambitab_gym.policies.base.reads_answers`, read from its class
    without building it); None when it declares nothing or does not import.

    >>> solver_reads_answers("interpretation"), solver_reads_answers("dialogue-sql")
    (False, True)
    """
    from ambitab_gym.policies.base import reads_answers

    try:
        factory = registry.get("solver", name).load()
    except UnknownComponent:
        if ":" not in name:
            return None
        try:
            factory = registry.resolve(name)
        except ConfigurationError:
            return None
    except ConfigurationError:
        return None
    return reads_answers(factory)


def either(names: Sequence[str], last: str = "or") -> str:
    """Names as one phrase: ``"a, b or c"`` (``last`` joins the last two).

    >>> either(["a", "b", "c"]), either(["x", "y"], "and"), either(["x"])
    ('a, b or c', 'x and y', 'x')
    """
    names = list(names)
    return ", ".join(names[:-1]) + f" {last} " + names[-1] if len(names) > 1 else "".join(names)


def answer_reading_solvers() -> tuple[str, ...]:
    """The registered solvers that read the answers: what dJ_resp and dJ_full need.

    >>> answer_reading_solvers()
    ('dialogue-sql', 'dialogue-sql-blind', 'llm')
    """
    return tuple(name for name in registry.names("solver") if solver_reads_answers(name))


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


def add_campaign_filter(parser: argparse.ArgumentParser) -> None:
    """``--campaign ID`` (repeatable): the commands that read a results file (``report``,
    ``audit``, ``rescore``, ``export``) keep only the named campaigns."""
    parser.add_argument(
        "--campaign",
        action="append",
        default=None,
        metavar="ID",
        help="only this campaign (id or unique id prefix); repeat for several",
    )


def default_results_file() -> Path:
    """The results file of ``evaluate`` and ``leakage`` when ``--results`` is not given: in the
    data home (``$AMBITAB_HOME``, else the platform's user data folder), never the working
    folder.

    >>> default_results_file().parts[-2:]
    ('results', 'ambitab-results.duckdb')
    """
    return data_home() / defaults.RESULTS_DIR / defaults.RESULTS_FILE


def results_file(args: argparse.Namespace) -> Path:
    """The ``--results`` file, or :func:`default_results_file`; stored back on ``args``."""
    if getattr(args, "results", None) is None:
        args.results = default_results_file()
    return Path(args.results)


def add_campaign_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a campaign command (``evaluate``, ``leakage``): ``--results``,
    ``--max-error-rate``, ``--retry-errors``, ``--new-campaign``, ``--progress-interval``.

    >>> parser = argparse.ArgumentParser()
    >>> add_campaign_arguments(parser)
    >>> args = parser.parse_args(["--max-error-rate", "5%", "--retry-errors"])
    >>> args.max_error_rate, args.retry_errors, args.new_campaign, args.results
    (0.05, True, False, None)
    """
    where = f"<data home>/{defaults.RESULTS_DIR}/{defaults.RESULTS_FILE}"
    parser.add_argument(
        "--results",
        type=output_file,
        default=None,
        metavar="PATH",
        help=f"DuckDB results file (default {where}, the data home being $AMBITAB_HOME or the "
        "user data folder; resumes when it holds the campaign)",
    )
    parser.add_argument(
        "--max-error-rate",
        type=share,
        default=defaults.MAX_ERROR_RATE,
        metavar="SHARE",
        help="exit with status 1 and a summary when more of the campaign's episodes than this "
        f"end in an error (0.1 or 10%%; default {defaults.MAX_ERROR_RATE:g})",
    )
    parser.add_argument(
        "--abort-after",
        type=non_negative_int,
        default=defaults.ABORT_AFTER_ERRORS,
        metavar="N",
        help="stop the campaign after N episodes in a row ended in a server error (connection, "
        f"timeout, 5xx, 429); 0: never (default {defaults.ABORT_AFTER_ERRORS})",
    )
    parser.add_argument(
        "--retry-errors",
        action="store_true",
        help="on resume, run the episodes stored with an error again (their rows are replaced)",
    )
    parser.add_argument(
        "--new-campaign",
        action="store_true",
        help="start this campaign even when the results file holds the same configuration "
        "over another corpus (built vs bundled, other data) or package version",
    )
    parser.add_argument(
        "--progress-interval",
        type=positive_float,
        default=defaults.PROGRESS_INTERVAL_S,
        metavar="SECONDS",
        help="seconds between progress lines when stderr is not a terminal "
        f"(default {defaults.PROGRESS_INTERVAL_S:g})",
    )


def add_concurrency_arguments(parser: argparse.ArgumentParser) -> None:
    """How many episodes a campaign keeps in flight and how their first ones start
    (``evaluate``, ``leakage``): ``--concurrency``, ``--start-interval``."""
    parser.add_argument(
        "--concurrency",
        type=positive_int,
        default=None,
        help=f"episodes in flight (default {defaults.CONCURRENCY}, "
        f"{defaults.LLM_CONCURRENCY} with an LLM)",
    )
    parser.add_argument(
        "--start-interval",
        type=non_negative_float,
        default=defaults.SLOT_START_INTERVAL_S,
        metavar="SECONDS",
        help="seconds between the first episodes of the --concurrency slots, so their first "
        "LLM calls do not reach the server in one burst (default "
        f"{defaults.SLOT_START_INTERVAL_S:g}; 0: all at once); timing only, not part of the "
        "campaign",
    )


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """Where a campaign's episodes run (``evaluate``, ``leakage``; docs/scale.md):
    ``--executor {local,processes,ray}``, ``--workers`` (processes), ``--ray-address``, ``--ray-workers``, ``--ray-chunk`` and
    ``--llm-replica`` (further servers serving ``--model``, spread across the Ray workers).

    >>> parser = argparse.ArgumentParser()
    >>> add_executor_arguments(parser)
    >>> args = parser.parse_args(["--executor", "ray", "--ray-workers", "4",
    ...                           "--llm-replica", "http://10.0.0.2:8000/v1"])
    >>> args.executor, args.ray_address, args.ray_workers, args.llm_replica
    ('ray', None, 4, ['http://10.0.0.2:8000/v1'])
    """
    parser.add_argument(
        "--executor",
        choices=("local", "processes", "ray"),
        default="local",
        help="where the episodes run: this process (local, the default; one event loop, one "
        "core), worker processes of this machine (processes: --concurrency split across "
        "--workers, for hundreds of LLM calls in flight, where one core caps a local run) or "
        "Ray workers (ray; pip install 'ambitab-gym[ray]'); the results store and resume are "
        "the same",
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        metavar="N",
        help="worker processes of --executor processes, --concurrency / N episodes in flight "
        "each (default: one per CPU)",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="the Ray cluster to join (auto, ray://HOST:10001; default: $RAY_ADDRESS, else a "
        "local one)",
    )
    parser.add_argument(
        "--ray-workers",
        type=positive_int,
        default=None,
        metavar="N",
        help="Ray workers, each with --concurrency episodes in flight and its own LLM client "
        "and engines (default: one per CPU of the cluster)",
    )
    parser.add_argument(
        "--ray-chunk",
        type=positive_int,
        default=None,
        metavar="N",
        help="records per work unit (default: max(8, 2 x concurrency))",
    )
    parser.add_argument(
        "--llm-replica",
        action="append",
        default=[],
        metavar="URL",
        help="another server serving the same --model as --llm-url (repeatable); Ray workers "
        "are spread over --llm-url and its replicas",
    )


def executor_from_args(args: argparse.Namespace, client, *, prog: str):
    """The executor the options name: None (this process), a
    :class:`~ambitab_gym.evaluation.process_executor.ProcessExecutor` (``--executor
    processes``; the caller closes it) or a
    :class:`~ambitab_gym.evaluation.ray_executor.RayExecutor`, whose replicas are checked
    (reachable, model served) first. Ray is imported only when it runs.

    Raises:
        UsageError: Ray options without ``--executor ray``, ``--workers`` without ``--executor
            processes``, or replicas without an LLM client.
    """
    replicas = list(getattr(args, "llm_replica", None) or [])
    executor = getattr(args, "executor", "local")
    workers = getattr(args, "workers", None)
    if workers is not None and executor != "processes":
        raise UsageError("--workers need(s) --executor processes")
    if executor != "ray":
        given = [
            name
            for name, value in (
                ("--ray-address", getattr(args, "ray_address", None)),
                ("--ray-workers", getattr(args, "ray_workers", None)),
                ("--ray-chunk", getattr(args, "ray_chunk", None)),
                ("--llm-replica", replicas),
            )
            if value
        ]
        if given:
            raise UsageError(f"{', '.join(given)} need(s) --executor ray")
        if executor == "processes":
            from ambitab_gym.evaluation.process_executor import ProcessExecutor

            return ProcessExecutor(workers=workers)
        return None
    urls: list[str] = []
    if replicas:
        if client is None:
            raise UsageError("--llm-replica needs --llm-url and --model (an LLM part to run)")
        from ambitab_gym.commands.llm_options import preflight

        checked = [client.on_server(url) for url in replicas]
        try:
            preflight(checked, concurrency=1, fixed=True, prog=prog)
        finally:
            for replica in checked:
                replica.close()
        urls = [client.base_url, *replicas]
    from ambitab_gym.evaluation.ray_executor import RayExecutor

    return RayExecutor(
        address=args.ray_address, workers=args.ray_workers, chunk=args.ray_chunk, llm_urls=urls
    )
