"""Shared parts of the upstream -> AmbiTab converters.

* :class:`Drop` - one source item (or one reading of it) left out, with its reason.
* :class:`Item` - one retained source item: the records it yields (usually one AVT).
* :class:`Conversion` - what a converter returns: items, drops and manifest facts.
* :class:`BuildOptions` - the user's choices (source, databases, seed, hooks, extras).
* :class:`Workspace` - the databases of the corpus being built, materialised lazily, with a
  trusted executor for the build-time checks.
* :class:`BuildError` - a user-facing failure whose message says what to do.
* helpers: :func:`sha256_file`, :func:`seeded_rng`, :func:`slug`, :func:`progress`,
  :func:`compare_for`, :func:`read_json_or_jsonl`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import shutil
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ambitab_gym.errors import ConversionError
from ambitab_gym.records import CompareRules, TaskRecord, json_error_text

# The term rules live in ambitab_gym.terms (validate shares them); re-exported here.
from ambitab_gym.terms import INSTRUCTIONS as INSTRUCTIONS
from ambitab_gym.terms import SQL_KEYWORDS as SQL_KEYWORDS
from ambitab_gym.terms import STOP_WORDS as STOP_WORDS
from ambitab_gym.terms import TOKEN as _TOKEN
from ambitab_gym.terms import Span as Span
from ambitab_gym.terms import find_term as find_term
from ambitab_gym.terms import is_stop_word as is_stop_word
from ambitab_gym.terms import term_occurs as term_occurs
from ambitab_gym.terms import term_pattern as term_pattern
from ambitab_gym.terms import term_problem as term_problem
from ambitab_gym.verify.base import Limits, QueryError
from ambitab_gym.verify.sqlite import SQLiteEngine

__all__ = [
    "BuildError",
    "BuildOptions",
    "Conversion",
    "Drop",
    "Item",
    "MALFORMED",
    "Workspace",
    "compare_for",
    "malformed",
    "plain_text",
    "progress",
    "read_json_or_jsonl",
    "seeded_rng",
    "sha256_file",
    "slug",
]

T = TypeVar("T")


#: Errors that a malformed upstream item raises while it is converted (it becomes a drop).
MALFORMED: tuple[type[Exception], ...] = (
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
    IndexError,
)


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def plain_text(text: str) -> str:
    """``text`` without ANSI terminal codes (sqlglot underlines the failing token with them).

    >>> plain_text("SELECT FROM \x1b[4mWHERE\x1b[0m (")
    'SELECT FROM WHERE ('
    """
    return _ANSI.sub("", text)


def malformed(key: str, error: Exception) -> Drop:
    """The drop for an upstream item the converter could not read.

    >>> malformed("dev.json#3", KeyError("SQL")).as_dict()
    {'item': 'dev.json#3', 'reason': 'malformed_item', 'detail': "KeyError: 'SQL'"}
    """
    return Drop(key, "malformed_item", f"{type(error).__name__}: {error}"[:300])


class BuildError(ConversionError, RuntimeError):
    """A build cannot proceed; the message tells the user what to change (a
    :class:`~ambitab_gym.errors.ConversionError`, category ``build``, and a ``RuntimeError``).

    Example:
        >>> str(BuildError("give the databases with --databases PATH"))
        'give the databases with --databases PATH'
    """

    category = "build"


@dataclass(frozen=True)
class Drop:
    """A source item (or one reading of it) that the converter left out.

    Example:
        >>> Drop("validation.json#3", "equal_results", "both readings return 2 rows").reason
        'equal_results'
    """

    item: str
    reason: str
    detail: str = ""
    group: str = ""  # the item's kind for per-kind reports (Ambrosia: its ambiguity type)

    def as_dict(self) -> dict[str, str]:
        """JSON form (one line of ``dropped.jsonl``; no terminal codes in the detail)."""
        out = {"item": self.item, "reason": self.reason, "detail": plain_text(self.detail)}
        if self.group:
            out["group"] = self.group
        return out


@dataclass
class Item:
    """One source item that yields records (usually the readings of one AVT).

    Attributes:
        key: a stable name of the source item, used in drop reports.
        records: its records, in order (the first is the AVT's default reading).
        min_records: the item is dropped when fewer records survive the build checks.
        group: the item's kind for per-kind drop reports ("" when the source has none).

    Example:
        >>> Item("dev.json#0", []).min_records
        1
    """

    key: str
    records: list[TaskRecord]
    min_records: int = 1
    group: str = ""


@dataclass
class Conversion:
    """What a converter produced, before the shared build checks.

    Example:
        >>> c = Conversion(corpus="taco", oracle="intent")
        >>> c.engine, c.dialect, c.items, c.drops
        ('sqlite', 'sqlite', [], [])
    """

    corpus: str
    oracle: str
    items: list[Item] = field(default_factory=list)
    drops: list[Drop] = field(default_factory=list)
    engine: str = "sqlite"
    dialect: str = "sqlite"
    description: str = ""
    licence: str = ""
    upstream: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, str] = field(default_factory=dict)  # relative path -> sha256
    notes: dict[str, Any] = field(default_factory=dict)
    check_references: bool = True


@dataclass
class BuildOptions:
    """The user's choices for one build.

    Attributes:
        source: the upstream release (file or folder) in its native layout.
        databases: where the upstream databases are, when not inside ``source``.
        seed: seed of every random draw (resampling, copied columns, split assignment).
        show_progress: draw progress bars on stderr.
        llm_url: base URL of an OpenAI-compatible endpoint for the model-based hooks.
        model: model name for that endpoint.
        llm_cache: a reply cache for the hooks' calls (:class:`~ambitab_gym.llm.cache.ReplyCache`
            file): a rebuild replays the stored replies instead of asking the model.
        responses: a frozen-response catalog (BIRD-Interact).
        extra: converter-specific settings (e.g. ``keep_management``, ``dialect``).

    Example:
        >>> BuildOptions(source=Path("x")).seed
        0
    """

    source: Path
    databases: Path | None = None
    seed: int = 0
    show_progress: bool = False
    llm_url: str | None = None
    model: str | None = None
    responses: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    llm_cache: Path | None = None


def sha256_file(path: str | Path) -> str:
    """The SHA-256 of a file, read in chunks.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "f")
    >>> _ = open(p, "w").write("abc")
    >>> sha256_file(p)[:12]
    'ba7816bf8f01'
    """
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def seeded_rng(seed: int, *keys: str) -> np.random.Generator:
    """A generator that depends only on the seed and the given keys (order matters).

    >>> int(seeded_rng(0, "a").integers(1000)) == int(seeded_rng(0, "a").integers(1000))
    True
    """
    words = [int(seed) & 0xFFFFFFFF]
    for key in keys:
        words.append(int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:8], 16))
    return np.random.default_rng(words)


def slug(text: str, *, max_length: int = 48) -> str:
    """A lowercase identifier made of letters, digits and underscores.

    >>> slug("Signal-to-Noise Quality (SNQI)")
    'signal_to_noise_quality_snqi'
    """
    out = re.sub(r"[^0-9a-zA-Z]+", "_", text).strip("_").lower()
    return out[:max_length].rstrip("_") or "x"


def progress(
    iterable: Iterable[T], *, desc: str, total: int | None = None, enabled: bool = False
) -> Iterator[T]:
    """Iterate with a tqdm bar on stderr when enabled (never on stdout)."""
    if not enabled:
        yield from iterable
        return
    from tqdm import tqdm

    yield from tqdm(iterable, desc=desc, total=total, file=sys.stderr, leave=False)


@functools.lru_cache(maxsize=4096)
def compare_for(
    sql: str, *, dialect: str = "sqlite", float_decimals: int | None = 4
) -> CompareRules:
    """Comparison rules for a reference query: ordered when its outermost query sorts.

    >>> compare_for("SELECT a FROM t ORDER BY a").order
    'ordered'
    >>> compare_for("SELECT a FROM (SELECT a FROM t ORDER BY a)").order
    'set'
    """
    order = "set"
    try:
        import sqlglot

        tree = sqlglot.parse_one(sql, read=dialect)
        if tree is not None and tree.args.get("order") is not None:
            order = "ordered"
    except Exception:  # unparsable: fall back to a textual check of the tail
        tail = re.sub(r"\([^()]*\)", "", sql)
        if re.search(r"\border\s+by\b", tail, re.IGNORECASE):
            order = "ordered"
    return CompareRules(order=order, float_decimals=float_decimals)


def read_json_or_jsonl(path: str | Path) -> list[Any]:
    """A JSON array file or a JSON Lines file as a list.

    Raises:
        BuildError: naming the file and line of malformed JSON.
    """
    path = Path(path)
    text = path.read_text("utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise BuildError(f"{path}: invalid JSON ({error})") from None
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise BuildError(f"{path}:{number}: invalid JSON ({json_error_text(error)})") from None
    return out


# -- databases of the corpus being built ------------------------------------------------------


@dataclass
class _Database:
    suffix: str  # ".sqlite" or ".sql"
    engine: str  # "sqlite" or "duckdb"
    source: Path | None = None  # an existing file to copy at the end
    builder: Callable[[Path], None] | None = None  # writes the file
    script: str | None = None  # SQL text (DuckDB scripts)
    built: Path | None = None


class Workspace:
    """The databases of a corpus under construction, and a trusted executor for checks.

    Databases are registered by name and materialised only when needed: existing upstream
    files are read in place for checks and copied into ``databases/`` at the end; built ones
    are written into ``databases/`` on first use.

    Args:
        root: the corpus folder being written.

    Example:
        >>> import tempfile
        >>> ws = Workspace(Path(tempfile.mkdtemp()))
        >>> ws.add_built("demo", lambda p: _sqlite_from_script("CREATE TABLE t(x); INSERT INTO t VALUES (1);", p))
        >>> ws.execute("demo", "SELECT x FROM t")
        [(1,)]
        >>> ws.close()
    """

    def __init__(self, root: Path, *, timeout_s: float = 60.0) -> None:
        self.root = Path(root)
        self.db_dir = self.root / "databases"
        self.timeout_s = timeout_s
        self._dbs: dict[str, _Database] = {}
        self._sqlite: dict[str, SQLiteEngine] = {}
        self._duckdb: dict[str, Any] = {}

    def __contains__(self, name: str) -> bool:
        return name in self._dbs

    @property
    def names(self) -> list[str]:
        return sorted(self._dbs)

    def engine_of(self, name: str) -> str:
        return self._dbs[name].engine

    def add_file(self, name: str, source: Path, *, engine: str = "sqlite") -> None:
        """Register an existing database file (copied into the corpus when used)."""
        self._dbs[name] = _Database(suffix=source.suffix or ".sqlite", engine=engine, source=source)

    def add_built(
        self, name: str, builder: Callable[[Path], None], *, suffix: str = ".sqlite"
    ) -> None:
        """Register a SQLite database that ``builder(path)`` writes."""
        self._dbs[name] = _Database(suffix=suffix, engine="sqlite", builder=builder)

    def add_script(self, name: str, script: str, *, engine: str = "duckdb") -> None:
        """Register a database shipped as a SQL script (built by the engine on first use)."""
        self._dbs[name] = _Database(suffix=".sql", engine=engine, script=script)

    def relative_file(self, name: str) -> str:
        return f"databases/{name}{self._dbs[name].suffix}"

    def path(self, name: str) -> Path:
        """A readable file of the database (the upstream file itself, or the built one)."""
        entry = self._dbs[name]
        if entry.source is not None:
            return entry.source
        if entry.built is None:
            target = self.root / self.relative_file(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            if entry.builder is not None:
                entry.builder(target)
            else:
                target.write_text(entry.script or "", encoding="utf-8")
            entry.built = target
        return entry.built

    def execute(self, name: str, sql: str, *, timeout_s: float | None = None) -> list[tuple]:
        """Run a trusted read-only query on a database; raises :class:`QueryError`."""
        entry = self._dbs[name]
        timeout = timeout_s or self.timeout_s
        if entry.engine == "sqlite":
            engine = self._sqlite.get(name)
            if engine is None:
                engine = SQLiteEngine(self.path(name), limits=Limits(timeout_s=timeout))
                self._sqlite[name] = engine
            limits = Limits(timeout_s=timeout, max_rows=1_000_000, max_sql_length=1_000_000)
            return engine.execute(sql, limits=limits).rows
        return self._execute_duckdb(name, sql, timeout)

    def _execute_duckdb(self, name: str, sql: str, timeout: float) -> list[tuple]:
        import duckdb

        connection = self._duckdb.get(name)
        if connection is None:
            connection = duckdb.connect(":memory:")
            connection.execute(self._dbs[name].script or self.path(name).read_text("utf-8"))
            self._duckdb[name] = connection
        timer = threading.Timer(timeout, connection.interrupt)
        timer.start()
        try:
            cursor = connection.cursor()
            try:
                return cursor.execute(sql).fetchall()
            finally:
                cursor.close()
        except duckdb.Error as error:
            category = "timeout" if "interrupt" in str(error).lower() else "runtime"
            raise QueryError(category, str(error).splitlines()[0]) from None
        finally:
            timer.cancel()

    def schema_text(self, name: str) -> str | None:
        """The ``CREATE`` statements of a SQLite database as the agent sees them (else None)."""
        if self._dbs[name].engine != "sqlite":
            return None
        query = (
            "SELECT sql FROM sqlite_master WHERE type IN ('table', 'view') "
            "AND sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
        )
        try:
            rows = self.execute(name, query)
        except (QueryError, sqlite3.Error):
            return None
        return ";\n".join(row[0].strip().rstrip(";") for row in rows) + ";"

    def finalize(self, used: set[str]) -> dict[str, str]:
        """Write the used databases into ``databases/``, delete unused ones.

        Returns:
            database name -> file path relative to the corpus folder.
        """
        self.close()
        out: dict[str, str] = {}
        for name in sorted(self._dbs):
            entry = self._dbs[name]
            target = self.root / self.relative_file(name)
            if name not in used:
                if entry.built is not None:
                    entry.built.unlink(missing_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if entry.source is not None:
                shutil.copyfile(entry.source, target)
            else:
                self.path(name)
            out[name] = self.relative_file(name)
        return out

    def close(self) -> None:
        """Close every connection opened for checks."""
        for engine in self._sqlite.values():
            engine.close()
        self._sqlite.clear()
        for connection in self._duckdb.values():
            connection.close()
        self._duckdb.clear()


def _sqlite_from_script(script: str, path: Path) -> None:
    """Write a SQLite database from a trusted script (deterministic bytes)."""
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA synchronous = OFF")
    try:
        connection.executescript(script)
        connection.commit()
    finally:
        connection.close()


# -- ambiguity terms: the request's own words ---------------------------------------------------
#
# One implementation, shared by every converter and by the validator's ``term_in_request`` and
# ``term_words`` checks. A term is the ambiguous span as it occurs in the public request: found
# with the deterministic oracle's own rule (words in order, separated by whitespace, not starting
# or ending inside a word, case-insensitive; :func:`term_pattern`), a whole phrase (a noun
# phrase, a value or a modifier) that is neither only function words, nor only SQL keywords, nor
# an SQL fragment, nor an instruction (:func:`term_problem`). Converters locate a span with
# :func:`find_phrase` (a candidate phrase, tolerant of plurals and, optionally, of shared stems),
# :func:`common_phrase` (the longest run of a source text's words that the request also has) or
# :func:`diff_phrase` (the request's words that none of its readings repeat), and widen it to
# whole words of a phrase with :func:`extend_phrase`.


@dataclass(frozen=True)
class TermChoice:
    """The term of an ambiguity, further names for it, and how it was obtained.

    Attributes:
        term: the phrase as the request writes it.
        aliases: source names the request does not use (a knowledge-base name, a column).
        origin: how the term was derived (``annotation``, ``question_diff``, ``evidence``,
            ``column_name``, ``synonym``, ``knowledge_base``, ``sql_snippet``,
            ``llm``, ``released``); recorded per ambiguity in ``source.term_origin`` and counted
            in the manifest.

    Example:
        >>> TermChoice("carcinogenic", ("label",), "evidence").aliases
        ('label',)
    """

    term: str
    aliases: tuple[str, ...] = ()
    origin: str = "annotation"


def _tokens(text: str) -> list[tuple[str, int, int]]:
    return [(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def _plural_forms(word: str) -> set[str]:
    w = word.lower()
    forms = {w}
    for suffix in ("'s", "s'", "\u2019s"):
        if w.endswith(suffix):
            forms.add(w[: -len(suffix)])
    if w.endswith("ies") and len(w) > 4:
        forms.add(w[:-3] + "y")
    if w.endswith("es") and len(w) > 3:
        forms.add(w[:-2])
    if w.endswith("s") and not w.endswith("ss") and len(w) > 2:
        forms.add(w[:-1])
    return forms


def words_match(a: str, b: str, *, stem: bool = False) -> bool:
    """Whether two words are one word up to case, plural and possessive endings, and - with
    ``stem`` - a shared stem of at least four letters (``weigh``/``weight``, ``create``/
    ``created``).

    >>> words_match("Countries", "country"), words_match("atoms", "atom"), words_match("age", "ages")
    (True, True, True)
    >>> words_match("weigh", "weight"), words_match("weigh", "weight", stem=True)
    (False, True)
    >>> words_match("name", "names", stem=True), words_match("nation", "national", stem=True)
    (True, True)
    >>> words_match("car", "care", stem=True)
    False
    """
    fa, fb = _plural_forms(a), _plural_forms(b)
    if fa & fb:
        return True
    if not stem:
        return False
    for x in fa:
        for y in fb:
            short, long_ = sorted((x, y), key=len)
            if len(short) >= 4 and long_.startswith(short) and len(long_) - len(short) <= 3:
                return True
    return False


def _trim(tokens: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    while tokens and is_stop_word(tokens[0][0]):
        tokens = tokens[1:]
    while tokens and is_stop_word(tokens[-1][0]):
        tokens = tokens[:-1]
    return tokens


_POSSESSIVE = re.compile(r"(?:'s|\u2019s|')$", re.IGNORECASE)
#: Auxiliaries and copulas: a phrase found by :func:`common_phrase` never spans one.
_CLAUSE_WORDS = frozenset(
    [
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "do",
        "does",
        "did",
        "have",
        "has",
        "had",
        "can",
        "could",
        "will",
        "would",
        "should",
    ]
)


def _span(text: str, tokens: list[tuple[str, int, int]]) -> Span:
    """The span of tokens, without a possessive ending on the last one."""
    start, end = tokens[0][1], tokens[-1][2]
    found = _POSSESSIVE.search(tokens[-1][0])
    if found and len(tokens[-1][0]) > len(found.group(0)) + 1:
        end -= len(found.group(0))
    return Span(start, end, text[start:end])


def _adjacent(
    text: str, left: tuple[str, int, int], right: tuple[str, int, int], *, comma: bool = False
) -> bool:
    """Whether only spaces (and, with ``comma``, one comma) separate two tokens."""
    between = text[left[2] : right[1]].strip(" \t")
    return between == "" or (comma and between == ",")


def find_phrase(text: str, phrase: str, *, stem: bool = False) -> Span | None:
    """Where a phrase occurs in a text, word by word, tolerant of plurals (and with ``stem``, of
    shared stems); the span is the text's own words.

    >>> find_phrase("Calculate the average number of oxygen atoms.", "average number of oxygen atom")
    Span(start=14, end=44, phrase='average number of oxygen atoms')
    >>> find_phrase("How much does the youngest dog weigh?", "weight", stem=True).phrase
    'weigh'
    >>> find_phrase("What are the labels for TR000, TR001 and TR002?", "TR000, TR001 and TR002").phrase
    'TR000, TR001 and TR002'
    >>> find_phrase("What percent form a triple-bond?", "triple bond").phrase
    'triple-bond'
    >>> find_phrase("What was noted on 2019/9/14?", "2019/9/14").phrase
    '2019/9/14'
    >>> find_phrase("no match here", "gym") is None
    True
    """
    wanted = [w for w, _, _ in _tokens(phrase)]
    if not wanted:
        return None
    found = _find_words(text, wanted, stem)
    if found is None and len(wanted) > 1:  # "triple bond" is also written "triple-bond"
        found = _find_words(text, ["-".join(wanted)], stem)
    return found


def _find_words(text: str, wanted: list[str], stem: bool) -> Span | None:
    tokens = _tokens(text)
    for i in range(len(tokens) - len(wanted) + 1):
        window = tokens[i : i + len(wanted)]
        if all(
            words_match(t[0], w, stem=stem) for t, w in zip(window, wanted, strict=True)
        ) and all(
            _adjacent(text, a, b, comma=True) for a, b in zip(window, window[1:], strict=False)
        ):
            return _span(text, window)
    return None


def common_phrase(
    text: str,
    source: str,
    *,
    stem: bool = False,
    exclude: Iterable[str] = (),
    avoid: Iterable[Span] = (),
) -> Span | None:
    """The longest run of a source text's words that the text also has, in the text's words.

    The run never starts or ends with a function word and holds at least one other word; runs
    made only of excluded words (e.g. a table's noun) do not count. Among runs of one length,
    a run holding the source's last content word (the head of a noun phrase, the concept of
    "A means B") wins, then the earlier position in the text. Runs overlapping a span in
    ``avoid`` (phrases other ambiguities already hold) do not count.

    >>> common_phrase("Which atoms are connected in single type bonds?",
    ...               "single type bond refers to bond_type = '-'").phrase
    'single type bonds'
    >>> common_phrase("What is the name of the document?", "document name", exclude=["document"]).phrase
    'name'
    >>> common_phrase("Of 100 molecules, how many are carcinogenic?", "molecules are carcinogenic").phrase
    'carcinogenic'
    >>> common_phrase("How many of the molecules are carcinogenic?", "molecules are carcinogenic").phrase
    'carcinogenic'
    >>> common_phrase("What is Abomination's eye colour?", "Abomination refers to superhero_name").phrase
    'Abomination'
    >>> common_phrase("Which shops are popular?", "the of a") is None
    True
    """
    text_tokens = _tokens(text)
    source_words = [w for w, _, _ in _tokens(source)]
    content_words = [w for w in source_words if not is_stop_word(w)]
    head = content_words[-1] if content_words else ""
    excluded = {e.lower() for e in exclude}
    taken = list(avoid)
    best: tuple[int, int, int] | None = None  # (length, holds the head, -start)
    best_tokens: list[tuple[str, int, int]] = []
    for i in range(len(text_tokens)):
        for j in range(len(source_words)):
            n = 0
            while (
                i + n < len(text_tokens)
                and j + n < len(source_words)
                and words_match(text_tokens[i + n][0], source_words[j + n], stem=stem)
                and text_tokens[i + n][0].lower() not in _CLAUSE_WORDS
                and (
                    n == 0
                    or _adjacent(text, text_tokens[i + n - 1], text_tokens[i + n], comma=True)
                )
            ):
                n += 1
            run = _trim(text_tokens[i : i + n])
            if not run or any(run[0][1] < t.end and t.start < run[-1][2] for t in taken):
                continue
            content = [t for t in run if not is_stop_word(t[0])]
            if all(any(words_match(t[0], e) for e in excluded) for t in content):
                continue
            holds_head = int(any(words_match(t[0], head) for t in run)) if head else 0
            key = (len(run), holds_head, -run[0][1])
            if best is None or key > best:
                best, best_tokens = key, run
    return _span(text, best_tokens) if best_tokens else None


def extend_phrase(text: str, span: Span, *, left: bool = True, right: bool = True) -> Span:
    """Widen a span to the whole phrase around it: to whole words, then over adjacent words
    that are not function words (no punctuation between).

    It knows no parts of speech: a verb right after a noun is taken too, so converters bound
    the extension with their annotations (Ambrosia's readings, the annotation's own words).

    >>> text = "List the streaming service names."
    >>> extend_phrase(text, Span(9, 18, "streaming"), left=False).phrase
    'streaming service names'
    >>> extend_phrase("How many carcinogenic molecules?", Span(9, 21, "carcinogenic")).phrase
    'carcinogenic molecules'
    >>> extend_phrase("the e-mail of students", Span(4, 6, "e-")).phrase
    'e-mail'
    """
    tokens = _tokens(text)
    inside = [i for i, t in enumerate(tokens) if t[2] > span.start and t[1] < span.end]
    if not inside:
        return span
    first, last = inside[0], inside[-1]
    while (
        left
        and first > 0
        and not is_stop_word(tokens[first - 1][0])
        and _adjacent(text, tokens[first - 1], tokens[first])
    ):
        first -= 1
    while (
        right
        and last + 1 < len(tokens)
        and not is_stop_word(tokens[last + 1][0])
        and _adjacent(text, tokens[last], tokens[last + 1])
    ):
        last += 1
    return _span(text, tokens[first : last + 1])


def trim_phrase(text: str, span: Span) -> Span | None:
    """A span without function words at its edges (None when nothing else is left).

    >>> text = "List the superheroes from Marvel Comics."
    >>> trim_phrase(text, find_phrase(text, "the superheroes from Marvel Comics")).phrase
    'superheroes from Marvel Comics'
    >>> trim_phrase("Which hero?", Span(0, 10, "Which hero")).phrase
    'hero'
    >>> trim_phrase("What is Copycat's race?", Span(8, 15, "Copycat")).phrase
    'Copycat'
    >>> trim_phrase("of the", Span(0, 6, "of the")) is None
    True
    """
    inside = [t for t in _tokens(text) if span.start <= t[1] < span.end]
    tokens = _trim(inside)
    if not tokens:
        return None
    out = _span(text, tokens)
    end = min(out.end, span.end)
    return Span(out.start, end, text[out.start : end])


def diff_phrase(question: str, readings: list[str]) -> Span | None:
    """The request's phrase its readings disagree on: the longest run of the question's words
    that no reading repeats (plurals tolerated), trimmed of function words.

    Used for vagueness: every reading replaces the vague words by a concrete criterion.

    >>> diff_phrase("Which restaurants are popular?",
    ...     ["Which restaurants have more than 100 reviews?", "Which restaurants are rated above 4?"]).phrase
    'popular'
    >>> diff_phrase("What's the best gym?", ["What is the gym with most members?",
    ...     "What is the gym with the highest rating?"]).phrase
    'best'
    >>> diff_phrase("Which gyms?", ["Which gyms?"]) is None
    True
    """
    reading_words = [[w for w, _, _ in _tokens(r)] for r in readings]
    tokens = _tokens(question)
    flags = [
        not any(any(words_match(t[0], w) for w in words) for words in reading_words) for t in tokens
    ]
    best: list[tuple[str, int, int]] = []
    run: list[tuple[str, int, int]] = []
    for token, flag in zip([*tokens, None], [*flags, False], strict=True):
        if flag and token is not None and (not run or _adjacent(question, run[-1], token)):
            run.append(token)
            continue
        trimmed = _trim(run)
        if trimmed and len(trimmed) > len(best):
            best = trimmed
        run = [token] if flag and token is not None else []
    return _span(question, best) if best else None


def strip_instructions(text: str) -> str:
    """A request without the instructions upstream loaders append (:data:`INSTRUCTIONS`).

    >>> strip_instructions("List hotels and restaurants with a pool. Show them in one table.")
    'List hotels and restaurants with a pool.'
    >>> strip_instructions("List hotels with a pool.  show them in one table")
    'List hotels with a pool.'
    """
    out = text.strip()
    changed = True
    while changed:
        changed = False
        for instruction in INSTRUCTIONS:
            pattern = re.compile(r"\s*" + r"\s+".join(instruction.split()) + r"\s*\.?\s*$", re.I)
            stripped = pattern.sub("", out)
            if stripped != out:
                out, changed = stripped.strip(), True
    return out


def count_term_origins(records: Iterable[TaskRecord]) -> dict[str, int]:
    """How the counted ambiguity terms of the records were derived (``source.term_origin``),
    once per AVT.

    >>> count_term_origins([])
    {}
    """
    counts: dict[str, int] = {}
    seen: set[str] = set()
    for record in records:
        if record.avt_id in seen:
            continue
        seen.add(record.avt_id)
        origins = (record.source or {}).get("term_origin") or {}
        for ambiguity in record.ambiguities:
            if not ambiguity.counted:
                continue
            origin = (
                str(origins.get(ambiguity.id, "unknown"))
                if isinstance(origins, dict)
                else "unknown"
            )
            counts[origin] = counts.get(origin, 0) + 1
    return dict(sorted(counts.items()))
