"""Discrete question menus for agents that pick from a list (stable-baselines3, RLlib, ...).

* :class:`MenuItem` - one candidate: its kind, the phrase it asks about and the question text.
* :class:`Menu` - the candidates of one episode; :func:`build_menu` makes it from a
  :class:`~ambitab_gym.trajectory.PublicView` **only** (request phrases, schema table and column
  names, :data:`OPEN_QUESTIONS`, ``STOP``). It never sees the record, so it cannot offer a
  candidate derived from registered ambiguities or resolutions (docs/design.md section 3). Schema names
  come from :func:`ambitab_gym.textutil.schema_names` (sqlglot), re-exported here.
* :class:`MenuLayout` - the shape of the numeric observation (global features + one feature row
  per slot); :func:`menu_features` computes it from the public view and the menu.
* :class:`QuestionMenu` - a Gymnasium wrapper: ``Discrete(n_slots)`` actions, a fixed-size
  ``Box`` observation, ``action_masks()`` for maskable algorithms. It reads the agent's view
  through the wrapper stack (:func:`~ambitab_gym.wrappers.stack.agent_view`), never from
  ``env.unwrapped``: under a ``SpecificationRandomization`` its menu is built from x'.

Everything is deterministic: hashing uses BLAKE2b, never Python's salted ``hash``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ambitab_gym.actions import STOP
from ambitab_gym.oracles.base import REFUSAL
from ambitab_gym.textutil import schema_names
from ambitab_gym.trajectory import PublicView
from ambitab_gym.wrappers.stack import AgentInterface, agent_view, check_agent_interface

__all__ = [
    "OPEN_QUESTIONS",
    "Menu",
    "MenuItem",
    "MenuLayout",
    "QuestionMenu",
    "build_menu",
    "menu_features",
    "schema_names",
]

ItemKind = Literal["stop", "generic", "request", "table", "column"]
_KINDS: tuple[str, ...] = ("stop", "generic", "request", "table", "column")

#: Record-independent open questions every menu offers (they name no phrase); not the generic
#: questions of the adversarial none-asker (``ambitab_gym.policies.scripted.GENERIC_QUESTIONS``).
OPEN_QUESTIONS: tuple[str, ...] = (
    "Could you tell me more about what you need?",
    "Is there anything else I should know to get this right?",
)


def _split(text: str) -> list[str]:
    return text.split()


_TOKEN = re.compile(r"[A-Za-z0-9]+(?:['\u2019\-][A-Za-z0-9]+)*")
# Words that never start or end a request phrase (articles, auxiliaries, question words, ...).
_STOPWORDS = frozenset(
    _split(
        "a an the of to for with from and or nor but than as that this these those there here "
        "is are was were be been being am do does did done have has had having will would can "
        "could shall should may might must what which who whom whose when where why how many "
        "much list show give find return get tell display count name names each every per all "
        "any some our their its my your his her we you they it i me us them please also just "
        "only into onto about then so such very not no yes if"
    )
)
# Prepositions that may start (not end) a phrase: "on time", "in 2023", "before 1900".
_LEADING_OK = frozenset(_split("on in at by over under before after within since during"))
_WORD_BUCKETS = 32
_SUFFIX_BUCKETS = 16
_TEXT_BUCKETS = 32
_COUNT_BUCKETS = 9  # 0..8, the last one means "8 or more"
_SLOT_SCALARS = 22
_GLOBAL_SCALARS = 2 * _COUNT_BUCKETS + 4


def _question(phrase: str) -> str:
    return f'What exactly do you mean by "{phrase}"?'


@dataclass(frozen=True)
class MenuItem:
    """One candidate action of a menu.

    Attributes:
        kind: ``stop``, ``generic``, ``request`` (a phrase of the request), ``table`` or
            ``column`` (a schema name).
        phrase: the visible text the question asks about ("" for stop and generic items).
        question: the action text sent to the env.
        start, end: token positions of a request phrase (``end`` exclusive); -1 otherwise.
    """

    kind: ItemKind
    phrase: str
    question: str
    start: int = -1
    end: int = -1

    @property
    def words(self) -> tuple[str, ...]:
        """The phrase's lowercase words."""
        return tuple(w.lower() for w in _TOKEN.findall(self.phrase))


@dataclass(frozen=True)
class Menu:
    """The candidates of one episode (at most ``n_slots``), plus what the features need.

    Example:
        >>> from ambitab_gym.records import PublicSpec
        >>> view = PublicView(PublicSpec(request="Who are our best customers?", database="shop"))
        >>> menu = build_menu(view, n_slots=8)
        >>> [item.phrase for item in menu.items if item.kind == "request"]
        ['best', 'customers', 'best customers']
        >>> menu.items[0].question == STOP
        True
    """

    items: tuple[MenuItem, ...]
    n_slots: int
    n_request_tokens: int
    schema_words: frozenset[str] = frozenset()
    schema_phrases: frozenset[str] = frozenset()
    context_words: frozenset[str] = frozenset()
    static: np.ndarray | None = field(default=None, compare=False, repr=False)

    def question(self, slot: int) -> str:
        """The action text of a slot; slots past the last candidate stop, as ``STOP`` does."""
        if 0 <= slot < len(self.items):
            return self.items[slot].question
        return STOP

    def mask(self) -> np.ndarray:
        """A boolean vector: which slots hold a candidate."""
        mask = np.zeros(self.n_slots, dtype=bool)
        mask[: len(self.items)] = True
        return mask


def _words(text: str) -> list[str]:
    return [w.lower() for w in _TOKEN.findall(text)]


def _humanize(identifier: str) -> str:
    return re.sub(r"[_\s]+", " ", identifier.strip('"`[]')).strip()


def _request_phrases(request: str, max_words: int) -> tuple[list[MenuItem], int]:
    tokens = list(_TOKEN.finditer(request))
    lowered = [t.group(0).lower() for t in tokens]
    items: list[MenuItem] = []
    seen: set[str] = set()
    for n in range(1, max_words + 1):
        for start in range(len(tokens) - n + 1):
            end = start + n
            first, last = lowered[start], lowered[end - 1]
            if last in _STOPWORDS or last in _LEADING_OK:
                continue
            if first in _STOPWORDS or (n == 1 and first in _LEADING_OK):
                continue
            phrase = request[tokens[start].start() : tokens[end - 1].end()]
            key = " ".join(lowered[start:end])
            if key in seen:
                continue
            seen.add(key)
            items.append(MenuItem("request", phrase, _question(phrase), start, end))
    return items, len(tokens)


def build_menu(
    view: PublicView,
    *,
    n_slots: int = 32,
    max_phrase_words: int = 3,
    max_schema: int = 6,
) -> Menu:
    """Build the candidate questions of an episode from what the agent sees.

    Order: ``STOP``, the generic questions, request phrases (1-word, then 2-word, ... in
    reading order), then schema names (tables, then columns that share a word with the
    request), cut to ``n_slots``. A schema name equal to a request phrase is not repeated.

    Args:
        view: the agent's view; only its spec is read (request, schema, column meanings,
            external knowledge).
        n_slots: the number of discrete actions.
        max_phrase_words: the longest request phrase, in words.
        max_schema: the most schema names on the menu.

    Returns:
        a :class:`Menu`.
    """
    if not isinstance(view, PublicView):
        raise TypeError(
            f"build_menu takes the agent's PublicView (agent_view(env)), not {type(view).__name__}"
        )
    fixed = [MenuItem("stop", "", STOP)] + [MenuItem("generic", "", q) for q in OPEN_QUESTIONS]
    if n_slots < len(fixed):
        raise ValueError(f"n_slots must be at least {len(fixed)} (STOP and generic questions)")
    spec = view.spec
    request_items, n_tokens = _request_phrases(spec.request, max_phrase_words)

    tables, columns = schema_names(spec.schema_text)
    for key in spec.column_meanings:
        table, _, column = key.rpartition(".")
        if table and table not in tables:
            tables.append(table)
        if column and column not in columns:
            columns.append(column)
    schema_phrases = frozenset(_humanize(n).lower() for n in tables + columns)
    schema_words = frozenset(w for n in schema_phrases for w in _words(n))
    context_words = frozenset(
        _words(" ".join(spec.column_meanings.values())) + _words(" ".join(spec.external_knowledge))
    )

    request_keys = {" ".join(item.words) for item in request_items}
    request_words = {w for item in request_items for w in item.words}
    request_stems = {w[:4] for w in request_words if len(w) >= 4}
    schema_items: list[MenuItem] = []
    for kind, names in (("table", tables), ("column", columns)):
        for name in names:
            phrase = _humanize(name)
            words = _words(phrase)
            key = " ".join(words)
            if not words or key in request_keys or words[-1] == "id":
                continue
            if kind == "column" and not (
                set(words) & request_words or {w[:4] for w in words} & request_stems
            ):
                continue
            request_keys.add(key)
            schema_items.append(MenuItem(kind, phrase, _question(phrase)))  # type: ignore[arg-type]
    schema_items = schema_items[:max_schema]
    room = n_slots - len(fixed) - len(schema_items)
    items = tuple((fixed + request_items[: max(room, 0)] + schema_items)[:n_slots])
    menu = Menu(items, n_slots, n_tokens, schema_words, schema_phrases, context_words)
    object.__setattr__(menu, "static", _static_rows(menu))
    return menu


def _bucket(word: str, salt: str, buckets: int) -> int:
    digest = hashlib.blake2b(f"{salt}:{word}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") % buckets


def _hashed(words: Iterable[str], salt: str, buckets: int) -> np.ndarray:
    out = np.zeros(buckets, dtype=np.float32)
    for word in words:
        out[_bucket(word, salt, buckets)] = 1.0
    return out


def _one_hot(value: int, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=np.float32)
    out[min(max(value, 0), size - 1)] = 1.0
    return out


@dataclass(frozen=True)
class MenuLayout:
    """Shape of a menu observation: ``global_dim`` values, then ``n_slots`` rows of ``slot_dim``.

    Example:
        >>> layout = MenuLayout(n_slots=4)
        >>> obs = np.zeros(layout.size, dtype=np.float32)
        >>> glob, slots = layout.split(obs)
        >>> glob.shape, slots.shape
        ((86,), (4, 70))
    """

    n_slots: int = 32
    global_dim: int = _GLOBAL_SCALARS + 2 * _TEXT_BUCKETS
    slot_dim: int = _SLOT_SCALARS + _WORD_BUCKETS + _SUFFIX_BUCKETS

    @property
    def size(self) -> int:
        """Length of the flat observation vector."""
        return self.global_dim + self.n_slots * self.slot_dim

    def split(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Split flat observations (``(..., size)``) into global and per-slot features."""
        glob = obs[..., : self.global_dim]
        slots = obs[..., self.global_dim :].reshape(*obs.shape[:-1], self.n_slots, self.slot_dim)
        return glob, slots


def _static_rows(menu: Menu) -> np.ndarray:
    """The per-slot features that do not change within an episode."""
    layout = MenuLayout(menu.n_slots)
    slots = np.zeros((layout.n_slots, layout.slot_dim), dtype=np.float32)
    tokens = max(menu.n_request_tokens, 1)
    for index, item in enumerate(menu.items):
        row = slots[index]
        words = item.words
        content = {w for w in words if w not in _STOPWORDS}
        row[0] = 1.0
        row[1 + _KINDS.index(item.kind)] = 1.0
        if words:
            row[6 + min(len(words), 3) - 1] = 1.0
        if item.start >= 0:
            row[9] = item.start / tokens
            row[10] = item.end / tokens
            row[11] = float(item.end == menu.n_request_tokens)
        row[12] = float(" ".join(words) in menu.schema_phrases) if words else 0.0
        row[13] = float(bool(content & menu.schema_words))
        row[14] = float(bool(content) and content <= menu.context_words)
        row[15] = 1.0  # asked zero times (updated per step)
        row[_SLOT_SCALARS : _SLOT_SCALARS + _WORD_BUCKETS] = _hashed(words, "word", _WORD_BUCKETS)
        row[_SLOT_SCALARS + _WORD_BUCKETS :] = _hashed(
            [w[-3:] for w in words], "suffix", _SUFFIX_BUCKETS
        )
    return slots


def menu_features(view: PublicView, menu: Menu) -> np.ndarray:
    """The numeric observation of a view: a deterministic function of visible text only.

    Global part: questions left and asked (one-hot), refusal statistics, menu fill, hashed
    words of the request and of the answers so far. Per slot: valid, kind, phrase length and
    position, schema/context overlap, how often it was asked and how it was answered, overlap
    with answered or refused phrases, hashed words and word endings of the phrase.

    Args:
        view: the agent's view.
        menu: the episode's menu (from :func:`build_menu` on the same spec).

    Returns:
        a float32 vector of ``MenuLayout(menu.n_slots).size`` values in [0, 1].
    """
    dialogue = view.dialogue
    refused = [t.answer.strip() == REFUSAL for t in dialogue]
    n = len(dialogue)
    glob = np.concatenate(
        [
            _one_hot(view.questions_left, _COUNT_BUCKETS),
            _one_hot(n, _COUNT_BUCKETS),
            np.array(
                [
                    float(refused[-1]) if n else 0.0,
                    sum(refused) / n if n else 0.0,
                    (n - sum(refused)) / n if n else 0.0,
                    len(menu.items) / menu.n_slots,
                ],
                dtype=np.float32,
            ),
            _hashed(_words(view.spec.request), "request", _TEXT_BUCKETS),
            _hashed(
                [w for t in dialogue for w in _words(t.answer)],
                "answer",
                _TEXT_BUCKETS,
            ),
        ]
    )

    asked: dict[str, list[bool]] = {}
    for turn, was_refused in zip(dialogue, refused, strict=True):
        asked.setdefault(turn.question, []).append(was_refused)
    answered_words: set[str] = set()
    refused_words: set[str] = set()
    for item in menu.items:
        outcomes = asked.get(item.question)
        if outcomes and item.words:
            (refused_words if all(outcomes) else answered_words).update(
                w for w in item.words if w not in _STOPWORDS
            )

    static = menu.static if menu.static is not None else _static_rows(menu)
    slots = static.copy()
    for index, item in enumerate(menu.items):
        outcomes = asked.get(item.question, [])
        content = {w for w in item.words if w not in _STOPWORDS}
        row = slots[index]
        row[15:18] = 0.0
        row[15 + min(len(outcomes), 2)] = 1.0
        row[18] = float(bool(outcomes) and not all(outcomes))
        row[19] = float(bool(outcomes) and all(outcomes))
        row[20] = float(not outcomes and bool(content & answered_words))
        row[21] = float(not outcomes and bool(content & refused_words))
    return np.concatenate([glob, slots.reshape(-1)]).astype(np.float32)


class QuestionMenu(AgentInterface, gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Discrete actions over agent-visible candidate questions, numeric observations.

    Each episode's menu comes from :func:`build_menu` on the agent's view as the stack below
    presents it (never the record; with a ``SpecificationRandomization`` below, x'). Action ``i`` sends ``menu.question(i)`` to the env; slots past the last candidate
    stop. The observation is :func:`menu_features` of the public view: a ``Box`` of
    ``layout.size`` float32 values. ``info["question"]`` holds the text that was sent.

    Args:
        env: an AmbiTab env (text actions), possibly wrapped by leakage or Gymnasium wrappers,
            not by another agent-side wrapper.
        n_slots: the number of discrete actions.
        max_phrase_words: the longest request phrase offered.
        max_schema: the most schema names offered.

    Raises:
        StackOrderError: when ``env`` already holds an agent-side wrapper.
        ValueError: when the env waits for SQL after asking (``mode="agent"``).

    Example:
        >>> import gymnasium as gym
        >>> import ambitab_gym
        >>> env = QuestionMenu(gym.make("AmbiTab-Bird-v0"), n_slots=16)
        >>> obs, info = env.reset(seed=0)
        >>> obs.shape == env.observation_space.shape, env.action_space
        (True, Discrete(16))
        >>> obs, reward, terminated, truncated, info = env.step(0)  # slot 0 is STOP
        >>> terminated, info["question"] == ambitab_gym.STOP
        (True, True)
    """

    def __init__(
        self,
        env: gym.Env,
        *,
        n_slots: int = 32,
        max_phrase_words: int = 3,
        max_schema: int = 6,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, n_slots=n_slots, max_phrase_words=max_phrase_words, max_schema=max_schema
        )
        gym.Wrapper.__init__(self, env)
        check_agent_interface(env, "QuestionMenu")
        if env.get_wrapper_attr("mode") == "agent":
            raise ValueError(
                "QuestionMenu only asks: its actions cannot write SQL. Use mode='ask_only' "
                "(question-F1) or mode='solver' (the env's solver writes the SQL)"
            )
        self.n_slots = int(n_slots)
        self.max_phrase_words = int(max_phrase_words)
        self.max_schema = int(max_schema)
        self.layout = MenuLayout(self.n_slots)
        self.action_space = spaces.Discrete(self.n_slots)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(self.layout.size,), dtype=np.float32)
        self.menu: Menu | None = None

    def _observe(self) -> np.ndarray:
        assert self.menu is not None
        return menu_features(agent_view(self.env), self.menu)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        _, info = self.env.reset(seed=seed, options=options)
        self.menu = build_menu(
            agent_view(self.env),
            n_slots=self.n_slots,
            max_phrase_words=self.max_phrase_words,
            max_schema=self.max_schema,
        )
        return self._observe(), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.menu is None:
            raise RuntimeError("call reset() first")
        question = self.menu.question(int(action))
        _, reward, terminated, truncated, info = self.env.step(question)
        info = {**info, "question": question}
        return self._observe(), float(reward), terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """Valid slots of the current menu (the ``MaskablePPO`` convention of sb3-contrib)."""
        if self.menu is None:
            return np.ones(self.n_slots, dtype=bool)
        return self.menu.mask()

    def candidates(self) -> Sequence[MenuItem]:
        """The current menu's items, slot by slot."""
        return () if self.menu is None else self.menu.items
