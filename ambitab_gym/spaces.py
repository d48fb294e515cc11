"""Spaces for text actions and observations.

* :class:`UnicodeText` - any Python ``str`` up to a maximum length (Gymnasium's ``Text`` admits
  only a fixed character set), with a ``sample()`` that yields random unicode text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.spaces import Space

from ambitab_gym.errors import ConfigurationError

__all__ = ["UnicodeText"]

# A sampling alphabet: ASCII, whitespace, punctuation, accented letters, CJK, emoji.
_ALPHABET = tuple(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    " \t\n.,;:!?'\"()[]{}<>/\\|*+-=_%$#@&^~`"
    "éèüößñçøåÆŒ"
    "中文字データ表"
    "αβγδ"
) + ("\U0001f600", "\u200b", "\x00")


class UnicodeText(Space[str]):
    """A space of unicode strings of length ``min_length`` to ``max_length``.

    ``contains`` accepts every ``str`` of admissible length; ``sample`` draws random text from a
    mixed alphabet (ASCII, punctuation, accented, CJK, emoji, NUL) with the space's RNG.

    Args:
        max_length: the longest admissible string.
        min_length: the shortest admissible string.
        max_sample_length: the longest string ``sample()`` draws (default ``min(max_length, 64)``).
        seed: seeds the sampler.

    Example:
        >>> space = UnicodeText(max_length=10, seed=0)
        >>> space.contains("Wie viele Käufe?"[:10]), space.contains(3), space.contains("x" * 11)
        (True, False, False)
        >>> text = space.sample()
        >>> isinstance(text, str) and len(text) <= 10
        True
    """

    def __init__(
        self,
        max_length: int = 4096,
        *,
        min_length: int = 0,
        max_sample_length: int | None = None,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        if min_length < 0 or max_length < min_length:
            raise ConfigurationError(
                f"need 0 <= min_length <= max_length, got {min_length}, {max_length}"
            )
        self.min_length = int(min_length)
        self.max_length = int(max_length)
        self.max_sample_length = int(
            max_sample_length if max_sample_length is not None else min(max_length, 64)
        )
        super().__init__(dtype=str, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random string of random length (``mask``/``probability`` are not supported)."""
        if mask is not None or probability is not None:
            raise NotImplementedError("UnicodeText.sample does not take a mask or probability")
        high = max(self.min_length, min(self.max_sample_length, self.max_length))
        length = int(self.np_random.integers(self.min_length, high + 1))
        picks = self.np_random.integers(0, len(_ALPHABET), size=length)
        return "".join(_ALPHABET[i] for i in picks)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def to_jsonable(self, sample_n: Sequence[str]) -> list[str]:
        return list(sample_n)

    def from_jsonable(self, sample_n: Sequence[str]) -> list[str]:
        return list(sample_n)

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, UnicodeText)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )
