"""BIRD records and databases -> AmbiTab-EW-Bird (evidence withheld).

BIRD's ``evidence`` field holds hints separated by semicolons. Each hint becomes a masked
knowledge ambiguity: its term is the phrase of the question the hint is about, as the question
writes it (``X`` of "X refers to Y" when the question uses it, plurals tolerated; when ``X`` is
a column or an SQL fragment, the question's phrase for ``Y`` - "carcinogenic" for "label = '+'
means molecules are carcinogenic" - with the column as an alias), its resolution is the hint,
and the hint is withheld from the visible prompt (the public spec holds the question only). Its aliases
(:func:`hint_aliases`) are the columns and values the hint uses and, when the hint sets a
condition on a compound term, the term's modifier ("long" of "long trip"); none names another
ambiguity of the row.
Hints that resolve to the same phrase are merged; a hint about no phrase of the question is
merged into the row's previous ambiguity (counted in ``provenance.merged_unlocated_hints``), and
a row none of whose hints names a phrase of the question is dropped (``no_term_in_request``).
Rows without evidence are dropped (``no_evidence``): only ambiguity-bearing rows are evaluated.
BIRD train becomes ``train`` and BIRD dev (or Mini-Dev) ``dev``.

The paper's row filter (keep a row when a model fails without the evidence and succeeds with
it) is the optional :class:`~ambitab_gym.convert.hooks.EvidenceBenefitFilter`, switched on by
``--llm-url`` and ``--model``.

* :func:`convert` - the converter entry point.
* :func:`split_evidence` - hints of an evidence string.
* :func:`hint_term` - the concept a hint defines; :func:`locate_hint` - the question's phrase
  for a hint.
* :func:`hint_aliases` - the words a person asks about a hint's ambiguity with.
* :func:`find_bird_files`, :func:`register_bird_databases` - shared with :mod:`.bird`.
"""

from __future__ import annotations

import re
from pathlib import Path

from ambitab_gym.aliases import (
    AGGREGATE_WORDS,
    GENERIC_NAMES,
    clean_aliases,
    natural_name,
    sql_names,
)
from ambitab_gym.convert.common import (
    MALFORMED,
    BuildError,
    BuildOptions,
    Conversion,
    Drop,
    Item,
    TermChoice,
    Workspace,
    common_phrase,
    find_phrase,
    find_term,
    malformed,
    progress,
    read_json_or_jsonl,
    sha256_file,
    term_problem,
    trim_phrase,
)
from ambitab_gym.convert.verbalize import code_names
from ambitab_gym.records import TaskRecord, parse_record
from ambitab_gym.terms import STOP_WORDS, lemma, words

__all__ = [
    "UPSTREAM",
    "convert",
    "find_bird_files",
    "hint_aliases",
    "hint_term",
    "locate_hint",
    "register_bird_databases",
    "split_evidence",
]

UPSTREAM = {
    "name": "BIRD",
    "url": "https://bird-bench.github.io/",
    "citation": "Li et al., 2023, Can LLM Already Serve as A Database Interface? (BIRD)",
    "licence": "CC BY-SA 4.0",
}

_STRONG = re.compile(
    r"\s+(?:refers?\s+to|referring\s+to|refers?|means?|stands?\s+for|is\s+defined\s+as|"
    r"represents?|indicates?|denotes?)\s+|\s*(?:=|:)\s*",
    re.IGNORECASE,
)
_WEAK = re.compile(r"\s+(?:is|are)\s+", re.IGNORECASE)


def split_evidence(evidence: str | None) -> list[str]:
    """The hints of a BIRD evidence string: split on semicolons, trimmed, empties dropped.

    >>> split_evidence("a refers to x ; b refers to y;")
    ['a refers to x', 'b refers to y']
    >>> split_evidence("major refers to major_name.")
    ['major refers to major_name']
    >>> split_evidence("")
    []
    """
    hints = []
    for part in (evidence or "").split(";"):
        hint = part.strip().rstrip(".").strip()
        if hint:
            hints.append(hint)
    return hints


def hint_term(hint: str) -> str:
    """The concept a hint defines: the text before "refers to", "means", "=", ":" ...,
    else before "is"/"are", else the hint itself.

    >>> hint_term("non-carcinogenic molecules refers to label = '-'")
    'non-carcinogenic molecules'
    >>> hint_term("average number of oxygen atom = AVG(element = 'o')")
    'average number of oxygen atom'
    >>> hint_term("Angela Sanders is the full name")
    'Angela Sanders'
    >>> hint_term("most common bond type refers MAX(COUNT(bond_type))")
    'most common bond type'
    """
    for pattern in (_STRONG, _WEAK):
        parts = pattern.split(hint, maxsplit=1)
        if len(parts) == 2:
            term = parts[0].strip().strip("'\"`").strip()
            if term:
                return term
    return hint.strip()


_IDENTIFIER = re.compile(
    r"^\s*`?([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)?)`?\s*(?:$|[=<>!]|\bin\b|\blike\b)", re.I
)


def _column_of(text: str) -> str | None:
    """The column a hint's left side names (``label`` of ``label = '+'``), else None."""
    found = _IDENTIFIER.match(text)
    if not found:
        return None
    name = found.group(1).split(".")[-1]
    looks_like_column = "_" in name or text.strip() != found.group(1) or name.islower()
    return name if looks_like_column and term_problem(name) is None else None


def locate_hint(hint: str, question: str) -> TermChoice | None:
    """The phrase of the question a hint is about, as the question writes it.

    In order: ``X`` of "X refers to Y" (plurals tolerated); the longest run of ``X``'s words
    the question has; when ``X`` is a column or SQL, the question's phrase for ``Y`` (the
    column goes into the aliases); the longest run of the hint's words the question has.
    Function words, SQL keywords and SQL fragments never qualify
    (:func:`~ambitab_gym.convert.common.term_problem`). None when nothing fits.

    >>> locate_hint("average number of oxygen atom = AVG(element = 'o')",
    ...             "Calculate the average number of oxygen atoms in single-bonded molecules.")
    TermChoice(term='average number of oxygen atoms', aliases=(), origin='evidence')
    >>> locate_hint("label = '+' means molecules are carcinogenic",
    ...             "Of the first 100 molecules in number order, how many are carcinogenic?")
    TermChoice(term='carcinogenic', aliases=('label',), origin='evidence')
    >>> locate_hint("percent = MULTIPLY(DIVIDE(SUM(gender = 'Female'), COUNT(id)), 100)",
    ...             "How many percent of female heroes are there?").term
    'percent'
    >>> locate_hint("label = '+' mean molecules are carcinogenic",
    ...             "What is the carcinogenic label for bond TR001_2_4?")
    TermChoice(term='carcinogenic', aliases=('label',), origin='evidence')
    >>> locate_hint("double bond refers to bond_type = ' = '", "Which atoms are double bonded?").term
    'double bonded'
    >>> locate_hint("Should consider the distinct atoms when counting", "How many atoms are there?").term
    'atoms'
    >>> locate_hint("full name refers to first_name, last_name", "What's Angela Sanders's major?") is None
    True
    """
    left, right = hint, ""
    for pattern in (_STRONG, _WEAK):
        parts = pattern.split(hint, maxsplit=1)
        if len(parts) == 2 and parts[0].strip():
            left, right = parts[0].strip().strip("'\"`").strip(), parts[1]
            break
    column = _column_of(left) if right else None
    usable = term_problem(left) is None
    plain_right = term_problem(right) is None  # "'+' means molecules are carcinogenic"
    attempts = []
    if column is not None and plain_right:
        attempts.append((common_phrase(question, right, stem=True), (column,)))
    if usable:
        attempts.append((find_phrase(question, left, stem=True), ()))
    if column is not None or not usable:
        attempts.append((common_phrase(question, right, stem=True), (column,) if column else ()))
    if usable:
        attempts.append((common_phrase(question, left, stem=True), ()))
    attempts.append((common_phrase(question, hint, stem=True), (column,) if column else ()))
    for found, aliases in attempts:
        span = trim_phrase(question, found) if found is not None else None
        if span is None or term_problem(span.phrase) is not None:
            continue
        if find_term(question, span.phrase) is None:
            continue
        kept = tuple(a for a in aliases if a.lower() != span.phrase.lower())
        return TermChoice(span.phrase, kept, "evidence")
    return None


_COLUMN_LIST = re.compile(r"^\s*[A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*\s*$")
_STATISTICS = frozenset(
    {"average", "mean", "median", "total", "sum", "number", "count", "maximum", "minimum"}
    | {"highest", "lowest", "largest", "smallest", "biggest", "overall"}
)
#: The computations a hint spells as calls ("AVG(", "SUM(", a percentage), and their words.
_COMPUTATIONS = (
    *(
        (re.compile(rf"\b{name}\s*\(", re.IGNORECASE), AGGREGATE_WORDS[name])
        for name in ("AVG", "SUM")
    ),
    (
        re.compile(r"\bDIVIDE\s*\(.*(?:\*\s*100|100\s*\))|\bMULTIPLY\s*\(.*100", re.IGNORECASE),
        ("percentage", "percent", "share"),
    ),
)
_CONDITION = re.compile(r"[<>=]|\b(?:between|like)\b|\bin\s*\(", re.IGNORECASE)


def _vague_modifier(term: str, hints: list[str], sql: str | None) -> str | None:
    """The modifier of a compound term ("long" of "long trip") when a hint sets a condition for
    it and the head noun names a table or column of the query (``sql``, when given): the word
    the condition defines. Not for names ("Dark Horse Comics", a quoted value), numbers, or
    statistics ("average" of "average attendance")."""
    words = term.split()
    if not 2 <= len(words) <= 3 or any(w.lower() in STOP_WORDS for w in words):
        return None
    if any(c.isdigit() for c in term) or all(w[:1].isupper() for w in words):
        return None
    if not any(_CONDITION.search(h) for h in hints):
        return None
    if any(f"'{term.lower()}'" in h.lower() for h in hints):
        return None
    if words[0].lower() in _STATISTICS:
        return None  # "average attendance": the word of the computation, not of the condition
    if sql is not None:
        head = lemma(words[-1])
        entities = {w for name in sql_names(sql) for w in name.split()}
        if not ({head, words[-1].lower()} & ({lemma(w) for w in entities} | entities)):
            return None
    return " ".join(words[:-1])


def hint_aliases(term: str, hints: list[str], sql: str | None = None) -> list[str]:
    """Candidate aliases of the ambiguity a term names, from its evidence hints: the modifier
    of a compound term the hints set a condition for, the columns and values the hints use in
    SQL (:func:`~ambitab_gym.convert.verbalize.code_names`; of "X refers to <SQL>" the SQL side
    only), the columns a hint names alone ("hometown county refers to county"), the words of
    an average, sum or percentage the hint computes, and the term's words that name one of
    those columns. Give the result to :func:`~ambitab_gym.aliases.clean_aliases`.

    Args:
        term: the ambiguity's term.
        hints: its evidence hints.
        sql: the reference query; when given, a modifier counts only if the term's head noun
            names one of its tables or columns ("trip"), not a value ("contain fluorine").

    >>> hint_aliases("long trip", ["long trip refers to duration > 1800"])
    ['long', 'duration', '1800']
    >>> hint_aliases("chlorine atoms", ["chlorine atoms refers to element = 'cl'"],
    ...              "SELECT COUNT(*) FROM atom WHERE element = 'cl'")
    ['chlorine', 'element', 'cl']
    >>> hint_aliases("contain fluorine", ["contain fluorine refers to element = 'f'"],
    ...              "SELECT COUNT(*) FROM atom WHERE element = 'f'")
    ['element']
    >>> hint_aliases("average number of oxygen atoms", ["average number of oxygen atom = AVG(element = 'o')"])
    ['element', 'mean', 'average']
    >>> hint_aliases("average height of the superheroes",
    ...              ["average height of the superheroes refers to AVG(height_cm)"])
    ['height cm', 'mean', 'average', 'height']
    >>> hint_aliases("hometown county", ["hometown county refers to county"])
    ['county']
    >>> hint_aliases("Dark Horse Comics", ["Dark Horse Comics refers to publisher_name = 'Dark Horse Comics'"])
    ['publisher name', 'Dark Horse Comics']
    """
    out = []
    modifier = _vague_modifier(term, hints, sql)
    if modifier is not None:
        out.append(modifier)
    for hint in hints:
        found = _STRONG.search(hint)
        left, right = (hint[: found.start()], hint[found.end() :]) if found else (hint, "")
        natural_left = found is not None and _column_of(left) is None
        out += code_names(right if natural_left else hint)
        if natural_left and "=" not in found.group() and _COLUMN_LIST.match(right):
            out += [natural_name(c) for c in right.split(",")]
        out += [w for call, found_words in _COMPUTATIONS if call.search(hint) for w in found_words]
    term_lemmas = {w.lemma for w in words(term)}
    column_words = {  # not of a value the term spells ("Dark Horse Comics")
        w.lemma
        for name in out
        if not {x.lemma for x in words(name)} <= term_lemmas
        for w in words(name)
    }
    out += [  # "height" of "average height of the superheroes" for AVG(height_cm)
        term[w.start : w.end]
        for w in words(term)
        if w.lemma in column_words
        and w.lemma.isalpha()
        and w.lemma not in GENERIC_NAMES | STOP_WORDS
    ]
    return list(dict.fromkeys(a for a in out if a.strip()))


def find_bird_files(source: Path) -> list[tuple[Path, str]]:
    """BIRD task files under ``source`` with their AmbiTab split.

    ``train.json`` -> train; ``dev.json`` and Mini-Dev's ``mini_dev_sqlite.json`` -> dev.
    """
    if source.is_file():
        name = source.name.lower()
        return [(source, "train" if name.startswith("train") else "dev")]
    found: list[tuple[Path, str]] = []
    for path in sorted(source.glob("*.json")):
        name = path.name.lower()
        if name in {"train.json"}:
            found.append((path, "train"))
        elif name in {"dev.json", "mini_dev_sqlite.json"}:
            found.append((path, "dev"))
    if not found:
        raise BuildError(
            f"no BIRD task file in {source}: give BIRD's dev/ or train/ folder "
            "(it holds dev.json or train.json)"
        )
    return found


def _database_roots(options: BuildOptions) -> list[Path]:
    base = options.source if options.source.is_dir() else options.source.parent
    roots = []
    if options.databases is not None:
        roots.append(options.databases)
    roots += [base / "dev_databases", base / "train_databases", base / "databases"]
    return [r for r in roots if r.is_dir()]


def register_bird_databases(options: BuildOptions, workspace: Workspace, db_ids: set[str]) -> None:
    """Register ``<root>/<db>/<db>.sqlite`` of every needed database that exists."""
    for root in _database_roots(options):
        for db_id in sorted(db_ids):
            if db_id in workspace:
                continue
            path = root / db_id / f"{db_id}.sqlite"
            if path.is_file():
                workspace.add_file(db_id, path)


def _ambiguities(
    question: str, hints: list[str], finder=None, sql: str | None = None
) -> tuple[list[dict], dict, int]:
    """The row's knowledge ambiguities, their term origins and the number of merged hints."""
    merged: dict[str, dict] = {}
    origins: dict[str, str] = {}
    pending: list[str] = []  # hints about no phrase of the question, before the first located
    last: str | None = None
    unlocated = 0
    for hint in hints:
        choice = locate_hint(hint, question)
        if choice is None and finder is not None:
            found = finder.find(question, hint)
            if found and term_problem(found) is None and find_term(question, found) is not None:
                choice = TermChoice(found, (), "llm")
        if choice is None:
            unlocated += 1
            if last is None:
                pending.append(hint)
            else:
                merged[last]["resolution"] += f"; {hint}"
                merged[last]["evidence"] += f"; {hint}"
            continue
        key = " ".join(choice.term.lower().split())
        if key in merged:
            merged[key]["resolution"] += f"; {hint}"
            merged[key]["evidence"] += f"; {hint}"
            for alias in choice.aliases:
                if alias.lower() not in {a.lower() for a in merged[key]["aliases"]}:
                    merged[key]["aliases"].append(alias)
            last = key
            continue
        ident = f"hint_{len(merged) + 1}"
        text = "; ".join([*pending, hint])
        pending = []
        merged[key] = {
            "id": ident,
            "term": choice.term,
            "aliases": list(choice.aliases),
            "kind": "knowledge",
            "resolution": text,
            "evidence": text,
        }
        origins[ident] = choice.origin
        last = key
    ambiguities = list(merged.values())
    candidates = {
        a["id"]: clean_aliases(
            a["term"],
            [*a["aliases"], *hint_aliases(a["term"], split_evidence(a["evidence"]), sql)],
        )
        for a in ambiguities
    }
    for a in ambiguities:
        others = [n for b in ambiguities if b is not a for n in [b["term"], *candidates[b["id"]]]]
        a["aliases"] = clean_aliases(a["term"], candidates[a["id"]], others)
    return ambiguities, origins, unlocated


def _record(row: dict, split: str, label: str, hints: list[str], finder=None) -> TaskRecord | None:
    qid = row.get("question_id", row.get("_index"))
    record_id = f"ew_bird-{split}-{qid}"
    sql = row["SQL"].strip()
    question = row["question"].strip()
    ambiguities, origins, unlocated = _ambiguities(question, hints, finder, sql)
    if not ambiguities:
        return None
    return parse_record(
        {
            "id": record_id,
            "avt_id": record_id,
            "corpus": "ew_bird",
            "split": split,
            "spec": {"request": question, "database": row["db_id"]},
            "ambiguities": ambiguities,
            "verification": {
                "engine": "sqlite",
                "database": row["db_id"],
                "reference_sql": sql,
                "compare": {"order": "set"},
            },
            "source": {
                "kind": "bird",
                "file": label,
                "question_id": row.get("question_id"),
                "difficulty": row.get("difficulty"),
                "evidence": row.get("evidence", ""),
                "term_origin": origins,
                "merged_unlocated_hints": unlocated,
            },
        },
        where=f"{label}#{qid}",
    )


def convert(options: BuildOptions, workspace: Workspace) -> Conversion:
    """Convert BIRD's dev/ or train/ folder (task JSON plus ``*_databases/``).

    Args:
        options: ``source`` is the BIRD folder or task file; ``databases`` the folder of
            ``<db>/<db>.sqlite`` when not beside the task file; ``llm_url``/``model`` switch
            on the evidence-benefit row filter.
        workspace: where the databases are registered.
    """
    files = find_bird_files(options.source)
    conversion = Conversion(
        corpus="ew_bird",
        oracle="knowledge",
        description=(
            "AmbiTab-EW-Bird built from BIRD: each semicolon-separated evidence hint is a masked "
            "knowledge ambiguity withheld from the visible prompt."
        ),
        licence="CC BY-SA 4.0 (BIRD)",
        upstream=UPSTREAM,
    )
    rows_by_file = []
    for path, split in files:
        conversion.inputs[path.name] = sha256_file(path)
        rows = read_json_or_jsonl(path)
        rows_by_file.append((path.name, split, rows))
    register_bird_databases(
        options, workspace, {r["db_id"] for _, _, rs in rows_by_file for r in rs}
    )
    row_filter = None
    if options.llm_url:
        from ambitab_gym.convert.hooks import EvidenceBenefitFilter, LLMClient

        row_filter = EvidenceBenefitFilter(
            LLMClient(
                options.llm_url, options.model or "", seed=options.seed, cache=options.llm_cache
            )
        )
        conversion.notes["row_filter"] = "evidence benefit (model fails without, succeeds with)"
    finder = None
    if options.llm_url:
        from ambitab_gym.convert.hooks import LLMClient, LLMTermFinder

        finder = LLMTermFinder(
            LLMClient(
                options.llm_url, options.model or "", seed=options.seed, cache=options.llm_cache
            )
        )
    seen: set[str] = set()
    merged_hints = 0
    for label, split, rows in rows_by_file:
        for index, row in progress(
            list(enumerate(rows)), desc=f"ew-bird {label}", enabled=options.show_progress
        ):
            row = {**row, "_index": index}
            key = f"{label}#{row.get('question_id', index)}"
            hints = split_evidence(row.get("evidence"))
            if not hints:
                conversion.drops.append(Drop(key, "no_evidence", "the row has no evidence hint"))
                continue
            try:
                record = _record(row, split, label, hints, finder)
            except MALFORMED as error:
                conversion.drops.append(malformed(key, error))
                continue
            if record is None:
                conversion.drops.append(
                    Drop(key, "no_term_in_request", "no hint is about a phrase of the question")
                )
                continue
            merged_hints += int(record.source.get("merged_unlocated_hints") or 0)
            if record.id in seen:
                conversion.drops.append(Drop(key, "duplicate_row", f"{record.id} appears twice"))
                continue
            seen.add(record.id)
            if row_filter is not None and record.spec.database in workspace:
                keep, why = row_filter.keep(
                    request=record.spec.request,
                    evidence=hints,
                    reference_sql=record.verification.reference_sql,
                    database=record.spec.database,
                    schema=workspace.schema_text(record.spec.database) or "",
                    execute=lambda db, sql: workspace.execute(db, sql),
                )
                if not keep:
                    conversion.drops.append(Drop(key, "no_evidence_benefit", why))
                    continue
            conversion.items.append(Item(key, [record]))
    conversion.notes["merged_unlocated_hints"] = merged_hints
    return conversion
