"""Reading replies: what :func:`ambitab_gym.actions.read_reply` costs, side by side.

Two measurements, each a ratio of two timings taken in alternation (machine noise hits both):

* ``step_share``: reading a realistic model reply (think blocks, fences, STOP variants, JSON,
  SQL) with ``read_reply`` against one ``env.step`` of a plain question on the bundled
  ``AmbiTab-Bird-v0`` (deterministic oracle; the step includes a reading of its own, memoized
  by the env). The ratio is read / step.
* ``tag_soup``: :func:`ambitab_gym.textutil.strip_thinking` against the three-regex
  substitution it replaced (reproduced below as ``_previous_strip``) on hostile text - ``n``
  unclosed ``<think>`` tags - at two sizes. The previous reader rescanned the rest of the text
  for every unclosed tag (quadratic); the ratio previous / current grows with ``n``.

    python benchmarks/replies.py [--repeats 5] [--soup 1000,4000]

Last line: ``{"step_share": {"read_us", "step_us", "ratio"}, "tag_soup": {"<n>": {"previous_ms",
"current_ms", "ratio"}}}`` (medians).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time

import gymnasium as gym

import ambitab_gym  # noqa: F401  (registers the ids)
from ambitab_gym.actions import read_reply
from ambitab_gym.textutil import strip_thinking

REPLIES = [
    "<think>\nTop by spending or by orders? I should ask.\n</think>\n\nWhat do you mean by top?",
    "Okay, the measure is open.\n</think>\n\nHow should spending be measured?",
    '```json\n{"type": "clarification", "output": "Which year do you mean?"}\n```',
    'Sure! Here is my next action:\n```json\n{"type": "done", "output": null}\n```',
    "Thanks, that settles everything I needed. <STOP>",
    "I have no further questions.\n\nSTOP",
    "Should the list stop at the end of 2023?",
    "Which year do you mean?",
    '{"type": "clarification", "output": "Which region?"}',
    "STOP",
]
SQL_REPLIES = [
    "```sql\nSELECT COUNT(*)\nFROM customers\nWHERE country = 'Germany'\n```",
    "Here is the query:\n\n```sql\nSELECT name FROM staff WHERE id = 1\n```\n\nIt lists them.",
    '{"reasoning": "r", "type": "final_sql", "output": "SELECT 1"}',
    "SELECT COUNT(*) FROM customers WHERE country = 'Germany'",
]

_OLD_BLOCK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.IGNORECASE | re.DOTALL)
_OLD_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
_OLD_OPEN = re.compile(r"<think(?:ing)?>", re.IGNORECASE)


def _previous_strip(text: str) -> str:
    """The reasoning stripper before issue 17 (for comparison only)."""
    text = _OLD_BLOCK.sub("", text)
    closes = list(_OLD_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opened = _OLD_OPEN.search(text)
    if opened:
        text = text[: opened.start()]
    return text.strip()


def _time(fn, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def step_share(repeats: int) -> dict[str, float]:
    env = gym.make("AmbiTab-Bird-v0").unwrapped
    record = next(r for r in env.records if r.m > 0)

    def read_all() -> None:
        for reply in REPLIES:
            read_reply(reply)
        for reply in SQL_REPLIES:
            read_reply(reply, phase="sql")

    def step() -> None:
        env.reset(seed=0, options={"record_id": record.id})
        env.step("Which year do you mean?")

    n_replies = len(REPLIES) + len(SQL_REPLIES)
    reads, steps = [], []
    for _ in range(repeats):
        reads.append(_time(read_all, 200) / n_replies)
        steps.append(_time(step, 200))
    env.close()
    read_us, step_us = statistics.median(reads) * 1e6, statistics.median(steps) * 1e6
    return {
        "read_us": round(read_us, 2),
        "step_us": round(step_us, 2),
        "ratio": round(read_us / step_us, 3),
    }


def tag_soup(sizes: list[int], repeats: int) -> dict[str, dict[str, float]]:
    results = {}
    for n in sizes:
        soup = "<think> " * n + "Which year?"
        assert strip_thinking(soup) == _previous_strip(soup) == ""
        previous, current = [], []
        for _ in range(repeats):
            previous.append(_time(lambda: _previous_strip(soup), 1))  # noqa: B023
            current.append(_time(lambda: strip_thinking(soup), 1))  # noqa: B023
        p_ms, c_ms = statistics.median(previous) * 1e3, statistics.median(current) * 1e3
        results[str(n)] = {
            "previous_ms": round(p_ms, 3),
            "current_ms": round(c_ms, 3),
            "ratio": round(p_ms / c_ms, 1),
        }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--soup", default="1000,4000", help="unclosed-tag counts, comma-separated")
    args = parser.parse_args(argv)
    share = step_share(args.repeats)
    print(
        f"read_reply {share['read_us']} us/reply; env.step {share['step_us']} us; "
        f"ratio {share['ratio']}"
    )
    soup = tag_soup([int(n) for n in args.soup.split(",")], args.repeats)
    for n, row in soup.items():
        print(
            f"tag soup n={n}: previous {row['previous_ms']} ms, current {row['current_ms']} ms, "
            f"ratio {row['ratio']}"
        )
    print(json.dumps({"step_share": share, "tag_soup": soup}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
