"""How often the reference matcher credits what a careful person would credit.

Asks every labelled question of ``tests/oracles/data`` (natural clarifying questions and
negatives, written without looking at the registered terms; see tests/oracles/labelled_set.py)
to the deterministic oracle of its task, over the bundled samples, corpora built from
``../shared/upstream``, the converter fixtures and generated tasks, and prints per source and
per kind of question:

* natural credit: positives credited to exactly their ambiguity (target >= 0.90);
* false credit: negatives (restatements, off-topic, generic, other-column questions) credited
  anything (target <= 0.05).

    python benchmarks/matcher_agreement.py [--set heldout|questions] [--misses N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "oracles"))

from labelled_set import (  # noqa: E402
    NEGATIVE_KINDS,
    POSITIVE_KINDS,
    build_sources,
    load_questions,
    score,
)


def measure(name: str) -> tuple[dict, list[dict]]:
    """The rates of one labelled set, and its misses."""
    with tempfile.TemporaryDirectory() as work:
        sources, missing = build_sources(Path(work))
        tally = score(load_questions(name), sources)
    per_source = {
        source: {
            "natural_credit": round(tally.rate(True, source), 3),
            "false_credit": round(tally.rate(False, source), 3),
        }
        for source in sorted({s for s, _ in tally.by_source})
    }
    per_kind = {k: round(tally.kind_rate(k), 3) for k in (*POSITIVE_KINDS, *NEGATIVE_KINDS)}
    result = {
        "set": name,
        "natural_credit": round(tally.rate(True), 3),
        "false_credit": round(tally.rate(False), 3),
        "per_source": per_source,
        "right_answer_share_per_kind": per_kind,
        "questions": sum(n for _, n in tally.by_source.values()),
        "skipped": tally.skipped,
        "sources_missing": missing,
    }
    return result, tally.misses


def run(small: bool = True) -> dict:
    """The held-out figures as ratios against the targets (for benchmarks/all.py)."""
    result, _ = measure("heldout")
    return {
        "natural credit (held-out)": {
            "ratio": result["natural_credit"],
            "target": 0.9,
            "better": "higher",
        },
        "false credit (held-out)": {
            "ratio": result["false_credit"],
            "target": 0.05,
            "better": "lower",
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="heldout", choices=("heldout", "questions"))
    parser.add_argument("--misses", type=int, default=0, help="print this many misses")
    args = parser.parse_args()
    result, misses = measure(args.set)
    print(
        f"{args.set}: natural credit {result['natural_credit']:.1%}, false credit "
        f"{result['false_credit']:.1%} over {result['questions']} questions"
    )
    print(f"{'source':26s} {'natural':>8s} {'false':>8s}")
    for source, rates in result["per_source"].items():
        print(f"{source:26s} {rates['natural_credit']:8.1%} {rates['false_credit']:8.1%}")
    print("right answers per kind (positives: credited to their ambiguity; negatives: nothing)")
    for kind, rate in result["right_answer_share_per_kind"].items():
        print(f"  {kind:18s} {rate:6.1%}")
    for miss in misses[: args.misses]:
        print(json.dumps(miss, ensure_ascii=False))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
