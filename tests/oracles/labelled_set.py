"""The labelled clarifying questions and the corpora they were written for.

``data/questions.jsonl`` (tuning) and ``data/heldout.jsonl`` (held out: read only to measure)
hold natural questions written for tasks of the six corpora and the generator by writers who saw
each task's request, schema and readings, never its registered terms or aliases. Each line:
``{"task": "<source>:<record id>", "kind", "label", "question"}`` where ``label`` is ``"A1"``,
``"A2"``, ... (the record's counted ambiguities in annotation order) or ``"none"``.

Sources: ``bundled/<name>`` (the bundled samples), ``upstream/<name>`` (built from
``../shared/upstream`` the way users build them), ``fixture/<name>`` (built from the converter
tests' fixtures in the upstream shape) and ``generated`` (``ambitab-gym generate --records 40
--seed 3 --ambiguities 1-2``).

* :func:`load_questions` - the lines of a data file.
* :func:`build_sources` - the corpora behind the tasks (skips what cannot be built here).
* :func:`score` - credits under the deterministic oracle, tallied per source and per kind.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ambitab_gym.cli import main
from ambitab_gym.corpora import Corpus, load_corpus
from ambitab_gym.oracles import OracleContext
from ambitab_gym.oracles.deterministic import deterministic_oracle

__all__ = [
    "DATA",
    "NEGATIVE_KINDS",
    "POSITIVE_KINDS",
    "Tally",
    "build_sources",
    "load_questions",
    "score",
]

DATA = Path(__file__).resolve().parent / "data"
REPO = Path(__file__).resolve().parents[2]
UPSTREAM = REPO.parent / "shared" / "upstream"
CONVERT_TESTS = REPO / "tests" / "convert"

POSITIVE_KINDS = (
    "paraphrase",
    "word_form",
    "reading_contrast",
    "column_naming",
    "wh_question",
    "exact_quote",
)
NEGATIVE_KINDS = ("restatement", "off_topic", "generic", "other_ambiguity")


def load_questions(name: str) -> list[dict]:
    """The labelled questions of ``data/<name>.jsonl``."""
    path = DATA / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def _cli(*args: str) -> None:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        status = main(list(args))
    if status != 0:
        raise RuntimeError(f"ambitab-gym {' '.join(args)} exited with {status}")


def build_sources(work: Path) -> tuple[dict[str, Corpus], dict[str, str]]:
    """Every source corpus that can be built here, and why the others cannot."""
    sources: dict[str, Corpus] = {}
    missing: dict[str, str] = {}
    for name in ("bird", "ew_bird", "bird_interact", "ambrosia", "ambiqt", "taco"):
        sources[f"bundled/{name}"] = load_corpus(name)
    out = work / "generated"
    _cli("generate", "--records", "40", "--seed", "3", "--ambiguities", "1-2", "--out", str(out))
    sources["generated"] = load_corpus(str(out))
    sys.path.insert(0, str(CONVERT_TESTS))
    try:
        from ambrosia_fixture import write_ambrosia_csv
        from convert_helpers import schema_only_databases
        from taco_fixture import write_taco
    finally:
        sys.path.remove(str(CONVERT_TESTS))
    csv = write_ambrosia_csv(work / "ambrosia-source")
    _cli("build", "ambrosia", "--source", str(csv), "--out", str(work / "fixture-ambrosia"))
    sources["fixture/ambrosia"] = load_corpus(str(work / "fixture-ambrosia"))
    taco = write_taco(work / "taco-source")
    _cli("build", "taco", "--source", str(taco), "--out", str(work / "fixture-taco"))
    sources["fixture/taco"] = load_corpus(str(work / "fixture-taco"))
    if not UPSTREAM.is_dir():
        for name in ("ambiqt", "bird_interact", "ew_bird"):
            missing[f"upstream/{name}"] = f"{UPSTREAM} is absent"
        return sources, missing
    _cli(
        "build", "ambiqt", "--source", str(UPSTREAM / "ambiqt" / "AmbiQT"),
        "--databases", str(UPSTREAM / "ambiqt" / "spider" / "database"),
        "--out", str(work / "upstream-ambiqt"), "--seed", "7",
    )  # fmt: skip
    sources["upstream/ambiqt"] = load_corpus(str(work / "upstream-ambiqt"))
    sample = UPSTREAM / "bird_interact"
    _cli(
        "build", "bird-interact",
        "--source", str(sample / "official_sample" / "bird_interact_data.jsonl"),
        "--databases", str(sample / "mini_interact"), "--out", str(work / "upstream-bi"),
    )  # fmt: skip
    sources["upstream/bird_interact"] = load_corpus(str(work / "upstream-bi"))
    dev = UPSTREAM / "bird" / "dev"
    databases = schema_only_databases(dev / "dev_tables.json", work / "bird-databases")
    _cli(
        "build", "ew-bird", "--source", str(dev), "--databases", str(databases),
        "--out", str(work / "upstream-ew-bird"),
    )  # fmt: skip
    sources["upstream/ew_bird"] = load_corpus(str(work / "upstream-ew-bird"))
    return sources, missing


@dataclass
class Tally:
    """Right answers over questions, per source and per kind, and the misses."""

    by_source: dict[tuple[str, bool], list[int]] = field(
        default_factory=lambda: defaultdict(lambda: [0, 0])
    )
    by_kind: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    misses: list[dict] = field(default_factory=list)
    skipped: int = 0

    def rate(self, positive: bool, source: str | None = None) -> float:
        """Positives credited to their ambiguity (``positive``), or negatives credited
        anything (not ``positive``), as a share."""
        right = total = 0
        for (src, pos), (ok, n) in self.by_source.items():
            if pos == positive and source in (None, src):
                right, total = right + ok, total + n
        if not total:
            return float("nan")
        return right / total if positive else 1 - right / total

    def kind_rate(self, kind: str) -> float:
        ok, n = self.by_kind[kind]
        return ok / n if n else float("nan")


def score(questions: list[dict], sources: dict[str, Corpus]) -> Tally:
    """Ask every question of a known source to its record's deterministic oracle."""
    tally = Tally()
    for item in questions:
        source, record_id = item["task"].split(":", 1)
        corpus = sources.get(source)
        try:
            record = corpus.record(record_id) if corpus is not None else None
        except KeyError:
            record = None  # the build no longer keeps this item
        if record is None:
            tally.skipped += 1
            continue
        matcher = deterministic_oracle(corpus.manifest.oracle).matcher
        context = OracleContext(record, spec=corpus.public_spec(record))
        counted = {a.id for a in record.counted_ambiguities}
        # a credit of a non-counted ambiguity (a sort order) is no credit for any metric
        got = matcher.match(item["question"], context) & counted
        positive = item["label"] != "none"
        if positive:
            want = record.counted_ambiguities[int(item["label"][1:]) - 1].id
            ok = got == frozenset({want})
        else:
            want, ok = None, not got
        for cell in (tally.by_source[(source, positive)], tally.by_kind[item["kind"]]):
            cell[0] += ok
            cell[1] += 1
        if not ok:
            tally.misses.append({**item, "want": want, "got": sorted(got)})
    return tally
