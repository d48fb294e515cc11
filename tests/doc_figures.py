"""The figures that README.md and docs/*.md quote from a command, and how to get them again.

Each :class:`Figure` names a page, a regular expression that finds the quoted figures in it
(its groups; it must match exactly once) and a function that runs the documented command and
returns the same figures, formatted as the page writes them. Nothing is copied by hand:

    python tests/doc_figures.py                  # compare; exit status 1 when a page differs
    python tests/doc_figures.py --write          # put what the commands print now in the pages
    python tests/doc_figures.py --slow [--write] # also the figures of commands that train

``tests/test_doc_figures.py`` compares the fast ones on every test run (they take seconds).
The slow ones - the trained SB3 askers, a minute or more of training - are rewritten by
``--slow --write``; their pages also say that they vary between versions and give the range
seen, which the test checks.

Transcripts (a ``$ command`` line and what it prints on stdout) are compared by their figures:
every number and id in the printed text, in order (the corpus checksum, the package version and
the campaign id too: a release or a corpus change makes them stale, and ``--write`` renews
them), with paths as a user would see them (the package folder as ``...``, the data home as
``~/.local/share/ambitab-gym``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import runpy
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
USER_HOME = "~/.local/share/ambitab-gym"  # how the pages write the data home (Linux default)
#: A number or a long hexadecimal id: what a transcript's figures are.
_FIGURE = re.compile(r"[0-9a-f]{12,}|\d+(?:\.\d+)?")


@contextlib.contextmanager
def _environment(cwd: Path, home: Path) -> Iterator[None]:
    """Run in ``cwd`` with the data home ``home`` (a fresh results file, no built corpora)."""
    before, old_home = Path.cwd(), os.environ.get("AMBITAB_HOME")
    os.chdir(cwd)
    os.environ["AMBITAB_HOME"] = str(home)
    try:
        yield
    finally:
        os.chdir(before)
        if old_home is None:
            os.environ.pop("AMBITAB_HOME", None)
        else:
            os.environ["AMBITAB_HOME"] = old_home


class Runs:
    """The documented commands, each run once (in-process, in a scratch folder with its own
    data home) and kept for every figure read from it."""

    def __init__(self, scratch: Path) -> None:
        self.cwd, self.home = scratch / "work", scratch / "home"
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        self._done: dict[tuple, tuple[str, str]] = {}

    def cli(self, *args: str) -> tuple[str, str]:
        """``ambitab-gym ARGS``: (stdout, stderr); the command must succeed."""
        from ambitab_gym.cli import main

        if args not in self._done:
            out, err = io.StringIO(), io.StringIO()
            with (
                _environment(self.cwd, self.home),
                contextlib.redirect_stdout(out),
                contextlib.redirect_stderr(err),
            ):
                status = main(list(args))
            if status != 0:
                raise RuntimeError(f"ambitab-gym {' '.join(args)}: exit {status}\n{err.getvalue()}")
            self._done[args] = (out.getvalue(), err.getvalue())
        return self._done[args]

    def script(self, path: str, *args: str) -> str:
        """``python PATH ARGS`` (a file of the repository): its stdout."""
        key = ("script", path, *args)
        if key not in self._done:
            out = io.StringIO()
            argv = sys.argv
            sys.argv = [str(ROOT / path), *args]
            try:
                with _environment(self.cwd, self.home), contextlib.redirect_stdout(out):
                    runpy.run_path(str(ROOT / path), run_name="__main__")
            finally:
                sys.argv = argv
            self._done[key] = (out.getvalue(), "")
        return self._done[key][0]

    def user_text(self, text: str) -> str:
        """Printed text with the paths a user of an installed package would see."""
        import ambitab_gym

        package_parent = Path(ambitab_gym.__file__).resolve().parent.parent
        text = text.replace(str(package_parent) + os.sep, ".../")
        return text.replace(str(self.home), USER_HOME)

    def leakage(self, *args: str) -> dict:
        """``ambitab-gym leakage ARGS --json``: the JSON line, plus ``stdout``, ``stderr``, the
        ``campaign`` id and the ``results`` file."""
        out, err = self.cli("leakage", *args, "--json")
        result = json.loads(out.strip().splitlines()[-1])
        campaign = re.search(r"\(campaign (\w+)\)", out).group(1)
        where = re.search(r"results in (.+) \(campaign", out).group(1)
        path = Path(where) if Path(where).is_absolute() else self.cwd / where
        return {**result, "stdout": out, "stderr": err, "campaign": campaign, "results": path}


def _points(cell: dict) -> str:
    """A leakage cell as the pages write it: ``51.67 [44.23, 57.97]``."""
    return f"{cell['mean']:.2f} [{cell['lo']:.2f}, {cell['hi']:.2f}]"


def _three(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


@dataclass(frozen=True)
class Figure:
    """Figures quoted on one page.

    Attributes:
        name: an id for the test and the script.
        doc: the page, relative to the repository root.
        pattern: finds the figures on the page (``re.M``); exactly one match; one figure per
            group.
        compute: runs the command and returns the figures, one string per group.
        slow: the command trains for a minute or more: only ``--slow`` runs it.
        transcript: the one group is a command's printed text, compared by its figures.
        varies: for a slow figure, a phrase the page must hold that says the figure varies
            between versions and gives the range seen.
        needs: modules the command imports beyond the core (an extra's).
    """

    name: str
    doc: str
    pattern: str
    compute: Callable[[Runs], tuple[str, ...]]
    slow: bool = False
    transcript: bool = False
    varies: str = ""
    needs: tuple[str, ...] = ()

    @property
    def path(self) -> Path:
        return ROOT / self.doc

    @cached_property
    def regex(self) -> re.Pattern:
        return re.compile(self.pattern, re.M)

    def match(self, text: str | None = None) -> re.Match:
        text = self.path.read_text("utf-8") if text is None else text
        found = list(self.regex.finditer(text))
        if len(found) != 1:
            raise AssertionError(
                f"{self.doc}: the pattern of {self.name!r} matches {len(found)} times, not once "
                "(the page's wording changed: update tests/doc_figures.py)"
            )
        return found[0]

    def quoted(self) -> tuple[str, ...]:
        """The figures as the page quotes them."""
        return self.match().groups()

    def same(self, quoted: tuple[str, ...], printed: tuple[str, ...]) -> bool:
        if self.transcript:
            return figures(quoted[0]) == figures(printed[0])
        return quoted == printed

    def write(self, printed: tuple[str, ...]) -> None:
        """Put ``printed`` in place of the quoted figures on the page."""
        text = self.path.read_text("utf-8")
        found = self.match(text)
        for group in range(len(printed), 0, -1):  # from the end: earlier offsets stay valid
            start, end = found.span(group)
            text = text[:start] + printed[group - 1] + text[end:]
        self.path.write_text(text, "utf-8")


def figures(text: str) -> list[str]:
    """The figures of a transcript: its numbers and ids, in order."""
    return _FIGURE.findall(text)


# -- the commands ---------------------------------------------------------------------------------

EVALUATE = ("evaluate", "AmbiTab-Bird-v0", "--limit", "3", "--results", "results.duckdb")
TACO = ("AmbiTab-TACO-v0", "--oracle", "leaky-sql-responder", "--asker", "generic")
TACO += ("--solver", "dialogue-sql-blind", "--seeds", "2")
GUARD = ("AmbiTab-Bird-v0", "--oracle", "leaky-sql-responder", "--asker", "generic")
GUARD += ("--solver", "dialogue-sql-blind")
INTERACT = ("AmbiTab-BIRD-Interact-v0", *TACO[1:])


def _transcript(runs: Runs, out: str) -> tuple[str]:
    return (runs.user_text(out),)


def _evaluate(runs: Runs) -> tuple[str]:
    return _transcript(runs, runs.cli(*EVALUATE)[0])


def _taco(runs: Runs) -> tuple[str]:
    return _transcript(runs, runs.leakage(*TACO)["stdout"])


def _guard_row(runs: Runs, guarded: bool) -> tuple[str, ...]:
    """A row of the response-guard table: dJ_resp, dJ_full, SR asker under the oracle and
    under the hybrid (match, reference responder), the flagged answers."""
    run = runs.leakage(*GUARD, *(["--response-guard"] if guarded else []))
    with duckdb.connect(str(run["results"]), read_only=True) as db:
        sr = dict(
            db.execute(
                "SELECT condition, avg(success) FROM episodes WHERE campaign_id = ? "
                "AND condition IN ('asker:actual', 'asker:hybrid') GROUP BY condition",
                [run["campaign"]],
            ).fetchall()
        )
    flagged = re.search(r"(\d+) oracle answer\(s\) in (\d+) episode\(s\) reveal SQL", run["stderr"])
    answers = f"{flagged.group(1)} in {flagged.group(2)} episodes"
    if guarded and "the response guard redacted them" in run["stderr"]:
        answers += ", all redacted"
    return (
        _points(run["d_j_resp"]),
        _points(run["d_j_full"]),
        f"{100 * sr['asker:actual']:.2f}",
        f"{100 * sr['asker:hybrid']:.2f}",
        answers,
    )


def _interact(runs: Runs) -> tuple[str]:
    run = runs.leakage(*INTERACT)
    resp, full = _points(run["d_j_resp"]), _points(run["d_j_full"])
    if resp != full:  # the sentence quotes one value for both
        raise AssertionError(f"BIRD-Interact: d_j_resp {resp} differs from d_j_full {full}")
    return (resp,)


def _grpo(runs: Runs) -> tuple[str, ...]:
    result = json.loads(runs.script("examples/grpo_question_f1.py").strip().splitlines()[-1])
    trained, random = result["trained"], result["random"]
    return (*(_three(trained[k]) for k in ("f1", "precision", "recall")), _three(random["f1"]))


def _random_menu(seeds: range) -> tuple[str, ...]:
    """F1, precision and recall of the uniform menu policy on Bird dev, averaged over
    ``seeds`` - what the SB3 example (seed 0) and ``benchmarks/train_sb3.py`` (10 seeds)
    compute."""
    import statistics

    from ambitab_gym.integrations.sb3 import (
        evaluate_menu_policy,
        make_menu_env,
        random_menu_policy,
    )

    env = make_menu_env("AmbiTab-Bird-v0", n_slots=32, env_kwargs={"split": "dev"})
    runs = [evaluate_menu_policy(random_menu_policy(seed), env)[0] for seed in seeds]

    def mean(key: str) -> float | None:  # as the benchmark averages: Nones left out, 4 places
        kept = [r[key] for r in runs if r[key] is not None]
        return round(statistics.fmean(kept), 4) if kept else None

    return tuple(_three(mean(k)) for k in ("f1", "precision", "recall"))


def _sb3_example(runs: Runs) -> tuple[str, ...]:
    runs.script("examples/train_sb3_asker.py", "train", "--steps", "20000", "--out", "asker.zip")
    out = runs.script("examples/train_sb3_asker.py", "evaluate", "asker.zip", "--split", "dev")
    trained = json.loads(out.strip().splitlines()[-1])["trained"]
    return tuple(_three(trained[k]) for k in ("f1", "precision", "recall"))


def _sb3_benchmark(runs: Runs) -> tuple[str, ...]:
    result = json.loads(runs.script("benchmarks/train_sb3.py").strip().splitlines()[-1])
    return tuple(
        _three(result[f"{who}_{k}"])
        for who in ("trained", "untrained")
        for k in ("f1", "precision", "recall")
    )


_TRANSCRIPT_BODY = r"\n((?:(?!```).*\n)+?)```"
_GUARD_ROW = r" \| ([^|\n]+?) \| ([^|\n]+?) \| ([^|\n]+?) \| ([^|\n]+?) \| ([^|\n]+?) \|$"
_F = r"(\d\.\d{3})"

FIGURES: tuple[Figure, ...] = (
    Figure(
        "evaluate-example",
        "docs/cli.md",
        r"^\$ ambitab-gym evaluate AmbiTab-Bird-v0 --limit 3 --results results\.duckdb"
        + _TRANSCRIPT_BODY,
        _evaluate,
        transcript=True,
    ),
    Figure(
        "leakage-example",
        "docs/leakage.md",
        r"^\$ ambitab-gym leakage AmbiTab-TACO-v0 --oracle leaky-sql-responder --asker generic "
        r"\\\n +--solver dialogue-sql-blind --seeds 2 --json" + _TRANSCRIPT_BODY,
        _taco,
        transcript=True,
    ),
    Figure(
        "response-guard-off",
        "docs/leakage.md",
        r"^\| no guard" + _GUARD_ROW,
        lambda r: _guard_row(r, False),
    ),
    Figure(
        "response-guard-on",
        "docs/leakage.md",
        r"^\| `--response-guard`" + _GUARD_ROW,
        lambda r: _guard_row(r, True),
    ),
    Figure(
        "bird-interact-leak",
        "docs/leakage.md",
        r"dialogue-sql-blind --seeds 2` gives `d_j_resp` = `d_j_full` = "
        r"(\d+\.\d\d \[\d+\.\d\d, \d+\.\d\d\])",
        _interact,
    ),
    Figure(
        "grpo-example",
        "docs/training.md",
        rf"held-out dev F1 {_F} \(precision {_F}, recall {_F}\) against {_F} for the uniform",
        _grpo,
    ),
    Figure(
        "sb3-example-random",
        "docs/training.md",
        rf'"random": \{{"f1": {_F}, "precision": {_F}, "recall": {_F}, \.\.\.\}}',
        lambda runs: _random_menu(range(1)),
        needs=("stable_baselines3",),
    ),
    Figure(
        "sb3-benchmark-random",
        "docs/training.md",
        rf"^\| uniform over the menu, mean of 10 seeds \| {_F} \| {_F} \| {_F} \|$",
        lambda runs: _random_menu(range(10)),
        needs=("stable_baselines3",),
    ),
    Figure(
        "sb3-example-trained",
        "docs/training.md",
        rf'"trained": \{{"f1": {_F}, "precision": {_F}, "recall": {_F}, \.\.\.\}}',
        _sb3_example,
        slow=True,
        needs=("stable_baselines3",),
        varies="trained figures vary between versions",
    ),
    Figure(
        "sb3-benchmark-trained",
        "docs/training.md",
        rf"^\| PPO \+ `MenuPolicy`, mean of 3 seeds \| {_F} \| {_F} \| {_F} \|\n"
        rf"\| same network, untrained \| {_F} \| {_F} \| {_F} \|$",
        _sb3_benchmark,
        slow=True,
        needs=("stable_baselines3",),
        varies="trained and untrained rows vary between versions",
    ),
)


def main(argv: list[str] | None = None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the pages' figures")
    parser.add_argument("--slow", action="store_true", help="also the figures of training runs")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these figures only")
    args = parser.parse_args(argv)
    chosen = [
        f for f in FIGURES if (args.slow or not f.slow) and (not args.only or f.name in args.only)
    ]
    stale = 0
    with tempfile.TemporaryDirectory(prefix="ambitab-doc-figures-") as scratch:
        runs = Runs(Path(scratch))
        for figure in chosen:
            quoted, printed = figure.quoted(), figure.compute(runs)
            if figure.same(quoted, printed):
                print(f"{figure.name}: {figure.doc} is current")
                continue
            stale += 1
            print(f"{figure.name}: {figure.doc} quotes {quoted}, the command prints {printed}")
            if args.write:
                figure.write(printed)
                print(f"{figure.name}: rewrote {figure.doc}")
    return 1 if stale and not args.write else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
