"""Every benchmark of this folder at a small size: one JSON object of ratios against targets.

Each benchmark module exposes ``run(small: bool = True) -> dict`` returning
``{"metric name": {"ratio": x, "target": y, "better": "lower" | "higher"}}``; this script
imports every ``benchmarks/*.py`` (but itself), calls ``run`` (``small=True`` unless ``--full``),
and prints ONE JSON object on standard output (what the benchmarks print themselves goes to
standard error):

* ``metrics``: per metric its ``ratio``, ``target``, ``better``, ``miss`` (how far the ratio is
  on the wrong side of its target, as a fraction of the target; 0 when met) and ``ok``;
* ``failed``: the metrics that miss their target by more than 20 % (``--tolerance``);
* ``skipped``: benchmarks without ``run``, or whose optional dependencies are not installed;
* ``errors``: benchmarks whose ``run`` raised; ``seconds``: each benchmark's wall time.

Exit status: 0 when every metric is within its tolerance and no benchmark raised, else 1. A
benchmark, not a test: it is not part of the test command.

    python benchmarks/all.py [--full] [--only env_step llm_throughput] [--skip train_sb3]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent

#: A metric fails when it misses its target by more than this fraction of the target.
TOLERANCE = 0.2


def benchmark_names() -> list[str]:
    """The benchmark modules of this folder, by name."""
    return sorted(
        p.stem for p in HERE.glob("*.py") if p.stem != "all" and not p.stem.startswith("_")
    )


def load(name: str) -> ModuleType:
    """Import ``benchmarks/<name>.py`` by path (the folder is no package)."""
    spec = importlib.util.spec_from_file_location(f"ambitab_benchmark_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def miss(ratio: float, target: float, better: str) -> float:
    """How far ``ratio`` is on the wrong side of ``target``, as a fraction of the target.

    >>> miss(1.8, 1.5, "lower"), miss(1.2, 1.5, "lower"), miss(0.72, 0.9, "higher")
    (0.2, 0.0, 0.2)
    """
    if better == "lower":
        return round(max(0.0, ratio - target) / target, 4)
    if better == "higher":
        return round(max(0.0, target - ratio) / target, 4)
    raise ValueError(f"better must be 'lower' or 'higher', not {better!r}")


def judge(metrics: dict[str, dict[str, Any]], tolerance: float = TOLERANCE) -> dict[str, Any]:
    """Each metric with its miss and verdict; a missing ratio or target counts as failed, and a
    metric that does not say which way is better is read as a cost (``lower``, said so).

    >>> judge({"a": {"ratio": 1.7, "target": 1.5}})["a"]["ok"]
    True
    """
    out = {}
    for name, metric in metrics.items():
        ratio, target, better = metric.get("ratio"), metric.get("target"), metric.get("better")
        if better is None:
            metric = {**metric, "better": "lower", "better_assumed": True}
            better = "lower"
        if ratio is None or target is None:
            out[name] = {**metric, "miss": None, "ok": False}
            continue
        missed = miss(float(ratio), float(target), better)
        out[name] = {**metric, "miss": missed, "ok": missed <= tolerance}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="each benchmark's default size")
    parser.add_argument("--only", nargs="+", default=None, metavar="NAME")
    parser.add_argument("--skip", nargs="+", default=[], metavar="NAME")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE)
    args = parser.parse_args(argv)
    names = [n for n in benchmark_names() if n not in args.skip]
    if args.only is not None:
        unknown = sorted(set(args.only) - set(names))
        if unknown:
            parser.error(f"no benchmark {unknown}; choose from {names}")
        names = [n for n in names if n in args.only]

    metrics: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    errors: dict[str, str] = {}
    seconds: dict[str, float] = {}
    for name in names:
        start = time.perf_counter()
        print(f"== {name}", file=sys.stderr, flush=True)
        try:
            # what a benchmark prints goes to stderr: stdout carries the one JSON object
            with contextlib.redirect_stdout(sys.stderr):
                module = load(name)
                run = getattr(module, "run", None)
                if run is None:
                    skipped[name] = "no run(small) function"
                    continue
                result = run(small=not args.full)
        except ModuleNotFoundError as error:  # an optional dependency (torch, playwright, ...)
            skipped[name] = f"not installed: {error.name}"
        except Exception as error:  # noqa: BLE001 - one broken benchmark does not stop the rest
            traceback.print_exc(file=sys.stderr)
            errors[name] = f"{type(error).__name__}: {error}"
        else:
            if not isinstance(result, dict) or not all(
                isinstance(m, dict) for m in result.values()
            ):
                errors[name] = f"run() returned {type(result).__name__}, not {{metric: dict}}"
                continue
            metrics.update(result)
        finally:
            seconds[name] = round(time.perf_counter() - start, 1)

    judged = judge(metrics, args.tolerance)
    failed = sorted(name for name, metric in judged.items() if not metric["ok"])
    print(
        json.dumps(
            {
                "metrics": judged,
                "failed": failed,
                "skipped": skipped,
                "errors": errors,
                "seconds": seconds,
                "tolerance": args.tolerance,
                "small": not args.full,
            },
            indent=1,
        )
    )
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
