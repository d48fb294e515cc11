"""``ambitab-gym generate --records N --seed S --out DIR``: write a procedurally generated corpus.

The folder is an ordinary corpus (``records.jsonl``, ``databases/*.sql``, ``manifest.json``
with counts and the generator's parameters): ``ambitab-gym validate DIR`` checks it,
``ambitab-gym evaluate DIR`` runs on it, ``gym.make("AmbiTab-AmbiQT-v0", corpus=Path(DIR))``
plays it. The same seed and options write byte-identical files.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

from ambitab_gym.corpora.corpus import is_path_reference
from ambitab_gym.generate.corpus import write_corpus
from ambitab_gym.generate.families import FAMILIES
from ambitab_gym.generate.tasks import GeneratorConfig

__all__ = ["parse_range", "register", "run"]


def parse_range(text: str) -> tuple[int, int]:
    """``"2"`` -> (2, 2); ``"0-3"`` or ``"0,3"`` -> (0, 3).

    >>> parse_range("1-3"), parse_range("2")
    ((1, 3), (2, 2))
    """
    parts = text.replace(",", "-").split("-")
    try:
        values = [int(p) for p in parts if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a range: {text!r} (use N or LO-HI)") from None
    if len(values) == 1:
        return values[0], values[0]
    if len(values) != 2 or values[0] > values[1]:
        raise argparse.ArgumentTypeError(f"not a range: {text!r} (use N or LO-HI)")
    return values[0], values[1]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``generate`` subcommand."""
    parser = subparsers.add_parser(
        "generate",
        help="write a corpus of procedurally generated tasks",
        description="Draw verified AVTs over synthetic SQLite databases and write them as a "
        "corpus folder that validate, evaluate and every env accept.",
    )
    parser.add_argument("--records", type=int, required=True, help="number of records")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed (default 0)")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument(
        "--ambiguities", type=parse_range, default=(0, 3), help="m per request: N or LO-HI"
    )
    parser.add_argument(
        "--families",
        default=",".join(FAMILIES),
        help=f"comma-separated ambiguity families (default all: {','.join(FAMILIES)})",
    )
    parser.add_argument(
        "--domains",
        default="all",
        help="train, test, all, or comma-separated domain names (default all)",
    )
    parser.add_argument(
        "--distractors", type=parse_range, default=(0, 1), help="unambiguous extra phrases"
    )
    parser.add_argument(
        "--oracle", choices=("intent", "knowledge"), default="intent", help="corpus oracle"
    )
    parser.add_argument("--databases-per-domain", type=int, default=16)
    parser.add_argument("--name", default="generated", help="corpus name (default generated)")
    parser.add_argument(
        "--force", action="store_true", help="write into a folder that already holds files"
    )
    parser.add_argument("--json", action="store_true", help="print the manifest as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the corpus; return 0, or 2 for bad options or an occupied folder."""
    out: Path = args.out
    if out.exists() and any(out.iterdir()) and not args.force:
        print(
            f"ambitab-gym generate: {out} is not empty (pass --force to write into it)",
            file=sys.stderr,
        )
        return 2
    try:
        config = GeneratorConfig(
            ambiguities=args.ambiguities,
            families=tuple(f.strip() for f in args.families.split(",") if f.strip()),
            domains=args.domains,
            distractors=args.distractors,
            databases_per_domain=args.databases_per_domain,
            oracle=args.oracle,
            corpus=args.name,
        )
        manifest = write_corpus(
            out, records=args.records, seed=args.seed, config=config, name=args.name
        )
    except ValueError as error:  # ConfigurationError: a bad option or an impossible mix
        print(f"ambitab-gym generate: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(manifest, ensure_ascii=False))
        return 0
    counts = manifest["counts"]
    splits = ", ".join(f"{s} {v['records']}" for s, v in manifest["splits"].items())
    # a bare name (`gen`) would be read as a corpus name, so the folder is shown as a path
    shown = str(out) if is_path_reference(str(out)) else os.path.join(os.curdir, str(out))
    print(
        f"wrote {counts['records']} records ({counts['avts']} AVTs, {splits}) over "
        f"{len(manifest['databases'])} databases to {shown}; check it with "
        f"`ambitab-gym validate {shlex.quote(shown)}`"
    )
    return 0
