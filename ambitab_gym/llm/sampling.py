"""Sampling per role, the per-call seed derivation, and the episode a call belongs to.

* :data:`ROLES` - ``asker``, ``matcher``, ``responder``, ``solver``.
* :class:`Sampling` - one role's temperature, top_p, top_k, max_tokens and seed.
* :data:`DEFAULT_SAMPLING` - the defaults per role (paper Table 7 where it states them).
* :class:`SamplingTable` - a :class:`Sampling` for each role (what a client carries and a
  campaign stores).
* :class:`EpisodeKey`, :func:`episode_scope`, :func:`current_episode` - the episode (campaign,
  condition, seed, record) the running coroutine plays; the campaign engine sets it per episode.
* :func:`derive_seed` - the seed of one request: a stable hash of the campaign seed, condition,
  record, role, turn, attempt and the role's seed.
* :func:`check_stored_sampling` - a campaign's stored sampling must be its client's.

This module imports nothing outside the standard library.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

__all__ = [
    "DEFAULT_SAMPLING",
    "ROLES",
    "SAMPLING_KEYS",
    "EpisodeKey",
    "Sampling",
    "SamplingTable",
    "check_stored_sampling",
    "current_episode",
    "derive_seed",
    "episode_scope",
]

#: The four LLM roles of the ask-then-solve protocol.
ROLES: tuple[str, ...] = ("asker", "matcher", "responder", "solver")


@dataclass(frozen=True)
class Sampling:
    """The sampling settings of one role; ``None`` leaves a field out of the request (the
    server's default applies).

    Attributes:
        temperature, top_p, top_k: sent as they are.
        max_tokens: the reply budget.
        seed: the role's base seed, mixed into every derived per-call seed (:func:`derive_seed`).

    >>> Sampling(temperature=0.0).replace(max_tokens=64).to_dict()["max_tokens"]
    64
    """

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_tokens: int | None = None
    seed: int = 0

    def replace(self, **changes: Any) -> Sampling:
        """A copy with some fields changed (``None`` values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def to_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in SAMPLING_KEYS}  # scalars: nothing to copy

    def request_fields(self, seed: int) -> dict[str, Any]:
        """The request body fields: the set ones, with ``seed`` as the request's seed.

        >>> Sampling(temperature=0.5, max_tokens=9).request_fields(7)
        {'temperature': 0.5, 'max_tokens': 9, 'seed': 7}
        """
        body = {key: value for key in _REQUEST_KEYS if (value := getattr(self, key)) is not None}
        body["seed"] = int(seed)
        return body


#: The sampling keys a command line may set.
SAMPLING_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Sampling))
_REQUEST_KEYS = tuple(key for key in SAMPLING_KEYS if key != "seed")

#: Defaults per role. Paper Table 7: asker and solver decode at temperature 0.7, top-p 0.8; the
#: Qwen3-14B oracle at temperature 0.7, top-p 0.8, top-k 20; Section D.5 states top-k 20 for
#: the asker. The paper states no top-k for the solver and no reply budgets: top-k is left to
#: the server, the budgets are this project's.
DEFAULT_SAMPLING: Mapping[str, Sampling] = {
    "asker": Sampling(temperature=0.7, top_p=0.8, top_k=20, max_tokens=512),
    "matcher": Sampling(temperature=0.7, top_p=0.8, top_k=20, max_tokens=256),
    "responder": Sampling(temperature=0.7, top_p=0.8, top_k=20, max_tokens=256),
    "solver": Sampling(temperature=0.7, top_p=0.8, max_tokens=1024),
}


@dataclass(frozen=True)
class SamplingTable:
    """A :class:`Sampling` for each of the four roles.

    >>> table = SamplingTable.build(temperature=0.0, roles={"solver": {"max_tokens": 64}})
    >>> table["solver"].temperature, table["solver"].max_tokens, table["asker"].max_tokens
    (0.0, 64, 512)
    """

    asker: Sampling = DEFAULT_SAMPLING["asker"]
    matcher: Sampling = DEFAULT_SAMPLING["matcher"]
    responder: Sampling = DEFAULT_SAMPLING["responder"]
    solver: Sampling = DEFAULT_SAMPLING["solver"]

    def __getitem__(self, role: str) -> Sampling:
        if role not in ROLES:
            raise KeyError(f"unknown LLM role {role!r}; use {', '.join(ROLES)}")
        return getattr(self, role)

    @classmethod
    def build(
        cls,
        *,
        roles: Mapping[str, Sampling | Mapping[str, Any]] | None = None,
        **every: Any,
    ) -> SamplingTable:
        """The defaults, then ``every`` (set fields for all roles), then ``roles`` (per role).

        Raises:
            ValueError: an unknown role or key.
        """
        unknown = set(every) - set(SAMPLING_KEYS)
        if unknown:
            raise ValueError(f"unknown sampling keys {sorted(unknown)}; use {SAMPLING_KEYS}")
        table = {role: DEFAULT_SAMPLING[role].replace(**every) for role in ROLES}
        for role, value in (roles or {}).items():
            if role not in ROLES:
                raise ValueError(f"unknown LLM role {role!r}; use {', '.join(ROLES)}")
            if isinstance(value, Sampling):
                table[role] = value
                continue
            bad = set(value) - set(SAMPLING_KEYS)
            if bad:
                raise ValueError(f"unknown sampling keys {sorted(bad)}; use {SAMPLING_KEYS}")
            table[role] = replace(table[role], **dict(value))
        return cls(**table)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """``{role: {key: value}}``: what a campaign stores (and hashes into its id)."""
        return {role: self[role].to_dict() for role in ROLES}


@dataclass(frozen=True)
class EpisodeKey:
    """The episode a call belongs to.

    Attributes:
        campaign: the campaign id ("" outside campaigns).
        condition: the campaign condition ("" outside campaigns).
        seed: the campaign (run) seed.
        record: the record id.
    """

    campaign: str = ""
    condition: str = ""
    seed: int = 0
    record: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_NO_EPISODE = EpisodeKey()

_EPISODE: contextvars.ContextVar[EpisodeKey | None] = contextvars.ContextVar(
    "ambitab_llm_episode", default=None
)


def current_episode() -> EpisodeKey | None:
    """The episode of the running code, or None outside :func:`episode_scope`."""
    return _EPISODE.get()


@contextlib.contextmanager
def episode_scope(key: EpisodeKey) -> Iterator[EpisodeKey]:
    """Calls made inside belong to episode ``key`` (an asyncio task keeps its own value)."""
    token = _EPISODE.set(key)
    try:
        yield key
    finally:
        _EPISODE.reset(token)


def derive_seed(
    episode: EpisodeKey | None, role: str, turn: int, attempt: int, role_seed: int = 0
) -> int:
    """The seed of one request.

    The first four bytes, big-endian, of ``sha256("ambitab-seed/v1|<campaign seed>|<condition>|
    <record>|<role>|<turn>|<attempt>|<role seed>")``, masked to 31 bits (every server accepts
    it). The campaign id is not part of it, so changing one role's settings changes no other
    role's seeds; the attempt is, so a retry after a timeout samples afresh.

    >>> key = EpisodeKey("c", "asker", 0, "bird-1")
    >>> derive_seed(key, "asker", 0, 1) == derive_seed(key, "asker", 0, 1)
    True
    >>> len({derive_seed(key, "asker", 0, 1), derive_seed(key, "asker", 0, 2),
    ...      derive_seed(key, "asker", 1, 1), derive_seed(key, "solver", 0, 1)})
    4
    """
    key = episode or _NO_EPISODE
    text = (  # one f-string: the same text as "|".join of the parts, int fields as str(int(...))
        f"ambitab-seed/v1|{int(key.seed)}|{key.condition}|{key.record}|{role}|{int(turn)}|"
        f"{int(attempt)}|{int(role_seed)}"
    )
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def check_stored_sampling(stored: Mapping[str, Any] | None, client: Any) -> None:
    """Check that a campaign config's ``llm["sampling"]`` is the sampling of its client.

    The stored table is part of the campaign id; a client that samples otherwise would file its
    episodes under a campaign that says something else. Without a stored table (campaigns built
    in Python) a warning says the id does not cover the sampling.

    >>> class Client:
    ...     sampling = SamplingTable()
    >>> check_stored_sampling(SamplingTable().to_dict(), Client())
    >>> check_stored_sampling({**SamplingTable().to_dict(), "asker": {}}, Client())
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the campaign config stores sampling {'asker': {}}, but the LLM client ...

    Raises:
        ValueError: the stored table differs from the client's.
    """
    table = getattr(client, "sampling", None)
    if not isinstance(table, SamplingTable):
        return
    if stored is None:
        logging.getLogger("ambitab_gym.llm").warning(
            "the campaign config stores no LLM sampling, so its id does not cover it; pass "
            "llm={'sampling': client.sampling.to_dict()}"
        )
        return
    mine = table.to_dict()
    if dict(stored) != mine:
        differ = {role: stored.get(role) for role in ROLES if stored.get(role) != mine[role]}
        raise ValueError(
            f"the campaign config stores sampling {differ}, but the LLM client samples with "
            f"{ {role: mine[role] for role in differ} }; store client.sampling.to_dict()"
        )
