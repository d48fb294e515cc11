"""``ambitab-gym list [--components] [--json]``: every corpus with the counts of paper Table 4,
or every registered component.

Bundled samples and corpora built into the data home are both listed; a built corpus shadows
the bundled sample of the same name (``load_corpus`` and ``gym.make`` pick the built one).
With ``--components`` the command lists :mod:`ambitab_gym.registry` instead: askers, solvers,
oracles, LLM-oracle access policies, LLM asker strategies, SQL engines, converters and env ids,
each with its one-line description (the same entries the other commands' ``--help`` lists),
then the leakage checks with the solver each needs: a component whose description names a
check that needs a solver reading the answers (``caught by dJ_resp``) says which solvers those
are (:data:`ambitab_gym.diagnostics.estimates.DIAGNOSTICS`, ``needs_answer_reader``; the
solvers' own ``reads_answers``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from ambitab_gym import registry
from ambitab_gym.commands._args import answer_reading_solvers, either, solver_reads_answers
from ambitab_gym.corpora import (
    BUNDLED_DIR,
    Corpus,
    CorpusNotFound,
    built_corpora_dir,
    resolve_corpus,
)
from ambitab_gym.corpora.stats import corpus_stats

__all__ = [
    "COLUMNS",
    "check_entries",
    "component_entries",
    "corpus_entries",
    "format_components",
    "format_table",
    "register",
    "run",
]

#: (JSON key, table heading) of the per-split columns, in Table 4 order plus AVTs.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("records", "records"),
    ("databases", "DBs"),
    ("records_with_ambiguities", "with amb."),
    ("ambiguities", "ambiguities"),
    ("avts", "AVTs"),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``list`` subcommand."""
    parser = subparsers.add_parser(
        "list",
        help="list the available corpora with their sizes per split",
        description="List every corpus: bundled samples and corpora built into the data home "
        "(a built corpus shadows the bundled one of the same name). Per split: records, "
        "databases, records with ambiguities, ambiguities (critical + knowledge) and AVTs.",
    )
    parser.add_argument(
        "--components",
        action="store_true",
        help="list the registered components (askers, solvers, oracles, access policies, LLM "
        "strategies, engines, converters, env ids) instead of the corpora",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON array (the last line of output)"
    )
    parser.set_defaults(func=run)


def check_entries() -> list[dict]:
    """One dict per leakage check (paper Table 14 order): ``check`` (its JSON key), ``label``
    and ``solvers``: the registered solvers that can show it, or None when its runs only ask
    (no solver).

    >>> [(e["label"], e["solvers"]) for e in check_entries()][:2]
    [('dJ_resp', ['dialogue-sql', 'dialogue-sql-blind', 'llm']), ('dRec_spec^Q', None)]
    """
    from ambitab_gym.diagnostics.estimates import DIAGNOSTICS

    readers = list(answer_reading_solvers())
    return [
        {"check": d.name, "label": d.label, "solvers": readers if d.needs_answer_reader else None}
        for d in DIAGNOSTICS
    ]


def _named_checks(description: str, checks: list[dict]) -> list[dict]:
    """The checks needing a solver whose label the description names (``caught by dJ_resp``)."""
    return [
        c
        for c in checks
        if c["solvers"] is not None
        and re.search(rf"(?<![\w^]){re.escape(c['label'])}(?![\w^])", description)
    ]


def component_entries() -> list[dict]:
    """One dict per registered component: ``kind``, ``name``, ``description``, ``factory``
    (``module:attr``) and ``tags``, in :data:`ambitab_gym.registry.KINDS` order; a solver also
    has ``reads_answers`` (its declaration, None when it makes none), a component whose
    description names a leakage check that needs a solver has ``needs_solver`` (check label ->
    the solvers that can show it).

    >>> entries = component_entries()
    >>> {"kind": "solver", "name": "dialogue-sql"} in [
    ...     {"kind": e["kind"], "name": e["name"]} for e in entries]
    True
    >>> next(e for e in entries if e["name"] == "leaky-sql-responder")["needs_solver"]
    {'dJ_resp': ['dialogue-sql', 'dialogue-sql-blind', 'llm']}
    """
    checks = check_entries()
    entries = []
    for kind in registry.KINDS:
        for c in registry.components(kind):
            entry: dict = {
                "kind": c.kind,
                "name": c.name,
                "description": c.description,
                "factory": c.factory,
                "tags": list(c.tags),
            }
            if kind == "solver":
                entry["reads_answers"] = solver_reads_answers(c.name)
            named = _named_checks(c.description, checks)
            if named:
                entry["needs_solver"] = {n["label"]: n["solvers"] for n in named}
            entries.append(entry)
    return entries


def format_components(entries: list[dict], checks: list[dict] | None = None) -> str:
    """The components as text: one block per kind, one aligned line per component, and a block
    of the leakage checks with the solver each needs (``checks``, from :func:`check_entries`).
    A component line names the solvers the checks it names need."""
    out: list[str] = []
    width = max((len(e["name"]) for e in entries), default=0)
    blind = [c["label"] for c in checks or () if c["solvers"] is not None]
    for kind, title in registry.KINDS.items():
        block = [e for e in entries if e["kind"] == kind]
        if not block:
            continue
        out += ["" if out else None, f"{title}:"]
        for e in block:
            line = f"  {e['name'].ljust(width)}  {e['description']}"
            if e.get("reads_answers") is False and blind:
                line += f"; reads only the stored answer texts: cannot show {' or '.join(blind)}"
            for label, solvers in e.get("needs_solver", {}).items():
                line += f"; {label} needs --solver {either(solvers)}"
            out.append(line)
    if checks:
        out += ["" if out else None, "leakage checks (ambitab-gym leakage), the solver each needs:"]
        label_width = max(len(c["label"]) for c in checks)
        for c in checks:
            need = (
                "no solver (its runs only ask)"
                if c["solvers"] is None
                else "a solver that reads the answers: " + either(c["solvers"])
            )
            out.append(f"  {c['label'].ljust(label_width)}  {need}")
    return "\n".join(line for line in out if line is not None)


def _folders() -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    for root, origin in ((BUNDLED_DIR, "bundled"), (built_corpora_dir(), "built")):
        if root.is_dir():
            for folder in sorted(root.iterdir()):
                if (folder / "manifest.json").is_file():
                    found.append((folder, origin))
    return found


def corpus_entries() -> list[dict]:
    """One dict per corpus folder: name, env id, origin, whether it is the one loaded by name,
    path, oracle, engine, version and per-split counts (or the error that stops it loading).

    Returns:
        The entries, bundled ones first, each group by folder name.
    """

    def active(folder: Path) -> bool:  # the folder gym.make / load_corpus pick for this name
        try:
            return resolve_corpus(folder.name)[0] == folder.resolve()
        except CorpusNotFound:
            return False

    entries = []
    for folder, origin in _folders():
        entry: dict = {
            "name": folder.name,
            "origin": origin,
            "active": active(folder),
            "path": str(folder),
        }
        try:
            corpus = Corpus(folder, origin=origin)
        except Exception as error:  # a broken corpus is listed, not fatal
            entry["error"] = f"{type(error).__name__}: {error}"
            entries.append(entry)
            continue
        manifest = corpus.manifest
        entry.update(
            name=corpus.name,
            env_id=manifest.env_id,
            version=manifest.version,
            oracle=manifest.oracle,
            engine=manifest.engine,
            splits=[s.as_dict() for s in corpus_stats(corpus)],
        )
        entries.append(entry)
    return entries


def format_table(entries: list[dict]) -> str:
    """The entries as an aligned text table, one row per corpus and split."""
    head = ["corpus", "env id", "origin", "split", *(title for _, title in COLUMNS)]
    rows: list[list[str]] = []
    notes: list[str] = []
    for entry in entries:
        origin = entry["origin"] + ("" if entry["active"] else " (shadowed)")
        if "error" in entry:
            rows.append([entry["name"], "-", origin, "-", *("-" for _ in COLUMNS)])
            notes.append(f"{entry['name']} ({entry['path']}): cannot be loaded: {entry['error']}")
            continue
        for split in entry["splits"]:
            values = [str(split[key]) for key, _ in COLUMNS]
            rows.append([entry["name"], entry["env_id"] or "-", origin, split["split"], *values])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    numeric = range(4, len(head))

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [line(head), line(["-" * w for w in widths]), *(line(r) for r in rows)]
    if notes:
        out += ["", *notes]
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    """Print the corpora (or the components) as a table or as JSON; returns 0."""
    if getattr(args, "components", False):
        components = component_entries()
        print(
            json.dumps(components) if args.json else format_components(components, check_entries())
        )
        return 0
    entries = corpus_entries()
    if args.json:
        print(json.dumps(entries, ensure_ascii=False))
        return 0
    if not entries:
        print("no corpora found", file=sys.stderr)
        return 0
    print(format_table(entries))
    print(f"\nbuilt corpora are read from {built_corpora_dir()}")
    return 0
