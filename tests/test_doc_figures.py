"""The figures README.md and docs/*.md quote from commands are what the commands print now
(issue 31, item 8).

The registry is ``tests/doc_figures.py``: each entry finds its figures in a page's text and
runs the documented command (in-process, in a scratch folder with its own data home). A page
that drifts from the command fails here; ``python tests/doc_figures.py --write`` rewrites it.
The figures of training runs (a minute or more) are not run here: their pages must say that
they vary between versions, with the range seen, and ``--slow --write`` renews them.
"""

from __future__ import annotations

import re

import pytest
from doc_figures import FIGURES, ROOT, Figure, Runs, figures

FAST = [f for f in FIGURES if not f.slow]
SLOW = [f for f in FIGURES if f.slow]
#: How long a documented command takes stays out of the pages that show the commands: "about
#: 20 seconds" goes stale with every machine (benchmarks/RESULTS.md has the measured times). The
#: pages on the verifier, the sandbox and scaling quote internals' latencies next to the
#: benchmark that measures them, and are not scanned.
TIMING = re.compile(
    r"(\babout|~|\btakes|\btook) ?(a |an |one |two |five |ten |\d+(\.\d+)? ?)"
    r"(s|sec|seconds?|minutes?|min)\b",
    re.I,
)
COMMAND_PAGES = ("README.md", "docs/cli.md", "docs/training.md", "docs/leakage.md")
COMMAND_PAGES += ("docs/generate.md", "docs/data.md", "docs/report.md", "docs/env.md")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    return Runs(tmp_path_factory.mktemp("doc-figures"))


@pytest.mark.parametrize("figure", FAST, ids=lambda f: f.name)
def test_quoted_figures_are_what_the_command_prints(figure: Figure, runs: Runs):
    for module in figure.needs:
        pytest.importorskip(module)
    quoted, printed = figure.quoted(), figure.compute(runs)
    if figure.transcript:
        assert figures(quoted[0]) == figures(printed[0]), (
            f"{figure.doc}: the transcript's figures differ from what the command prints now; "
            f"run `python tests/doc_figures.py --write --only {figure.name}`\n{printed[0]}"
        )
    else:
        assert quoted == printed, (
            f"{figure.doc} quotes {quoted}, the command prints {printed}; "
            f"run `python tests/doc_figures.py --write --only {figure.name}`"
        )


@pytest.mark.parametrize("figure", SLOW, ids=lambda f: f.name)
def test_slow_figures_say_they_vary(figure: Figure):
    """Found once (so ``--slow --write`` can renew them), and the page says they vary between
    versions, giving the range seen."""
    assert figure.varies
    figure.match()
    text = " ".join(figure.path.read_text("utf-8").split())
    assert figure.varies in text, f"{figure.doc}: say that the figures of {figure.name} vary"
    sentence = text.split(figure.varies, 1)[1].split(". ")[0]
    assert re.search(r"\d\.\d+-\d\.\d+", sentence), f"{figure.doc}: give the range seen"


def test_write_puts_the_printed_figures_in_place(tmp_path, monkeypatch):
    """``--write`` replaces exactly the quoted figures and leaves the page's other text."""
    page = tmp_path / "page.md"
    page.write_text("F1 0.613 (precision 0.556, recall 0.816) against 0.230 for the uniform\n")
    figure = Figure(
        "t",
        "page.md",
        r"F1 (\d\.\d{3}) \(precision (\d\.\d{3}), recall (\d\.\d{3})\) against (\d\.\d{3})",
        lambda runs: ("0.742", "0.643", "0.816", "0.219"),
    )
    monkeypatch.setattr(Figure, "path", property(lambda self: page))
    figure.write(figure.compute(None))
    assert page.read_text() == (
        "F1 0.742 (precision 0.643, recall 0.816) against 0.219 for the uniform\n"
    )
    assert figure.quoted() == ("0.742", "0.643", "0.816", "0.219")


def test_user_pages_quote_no_timings():
    """The pages that show commands point to benchmarks/RESULTS.md (or give a range) for how
    long a command takes, rather than a time that differs on the next machine."""
    found = []
    for name in COMMAND_PAGES:
        page = ROOT / name
        text = " ".join(page.read_text("utf-8").split())
        found += [f"{page.name}: {m.group(0)!r}" for m in TIMING.finditer(text)]
    assert not found, found
