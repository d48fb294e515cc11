"""The one exception tree of ``ambitab-gym``: every error raised to users is an :class:`AmbiTabError`.

Each class has a ``category``: a short, stable word that campaigns record on a failed episode
(``error`` column of the results store) and that :func:`category_of` returns for any exception.
Classes defined elsewhere keep their names and modules and subclass one of these bases; those
that subclassed a builtin before (``ValueError``, ``LookupError``, ``RuntimeError``) still do, so
``except ValueError`` keeps catching them.

The bases defined here, with their categories: :class:`AmbiTabError` ("error"),
:class:`CorpusError` ("corpus"), :class:`ConfigurationError` ("configuration", a
``ValueError``) with :class:`UnknownComponent`, :class:`UsageError` and
:class:`MissingDependency`, :class:`EngineError` ("engine"), :class:`LLMServiceError`
("llm_error", a ``RuntimeError``), :class:`ConversionError` ("conversion") and
:class:`StoreError` ("store"). The complete tree, with every class of the package, is in
docs/design.md (section Errors), which a test keeps equal to the code.

Example:
    >>> error = UnknownComponent("asker", "nobody", ("full", "none"))
    >>> isinstance(error, (AmbiTabError, ValueError)), category_of(error)
    (True, 'unknown_component')
    >>> print(error)
    unknown asker 'nobody'; use one of: full, none
    >>> category_of(KeyError("x")), category_of(TimeoutError())
    ('KeyError', 'TimeoutError')
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "AmbiTabError",
    "ConfigurationError",
    "ConversionError",
    "CorpusError",
    "EngineError",
    "LLMServiceError",
    "MissingDependency",
    "StoreError",
    "UnknownComponent",
    "UsageError",
    "category_of",
]


class AmbiTabError(Exception):
    """The root of every error ``ambitab-gym`` raises on purpose.

    Attributes:
        category: a short word naming the kind of failure (class attribute; an instance may
            override it, as :class:`~ambitab_gym.verify.QueryError` does per query).

    >>> AmbiTabError("boom").category
    'error'
    """

    category: str = "error"


class CorpusError(AmbiTabError):
    """A corpus, a corpus file or a record cannot be used.

    >>> CorpusError("bad manifest").category
    'corpus'
    """

    category = "corpus"


class ConfigurationError(AmbiTabError, ValueError):
    """A bad argument, option or name given by the user (a ``ValueError`` too).

    >>> isinstance(ConfigurationError("x"), ValueError)
    True
    """

    category = "configuration"


class UnknownComponent(ConfigurationError):
    """A component name the registry does not know; the message lists the valid ones.

    Args:
        kind: the component kind (``asker``, ``solver``, ...).
        name: the name that was given.
        valid: the names that would have worked.
        hint: an extra sentence (e.g. how to pass an import path).

    >>> UnknownComponent("engine", "oracle-db", ("duckdb", "sqlite")).valid
    ('duckdb', 'sqlite')
    """

    category = "unknown_component"

    def __init__(self, kind: str, name: str, valid: Iterable[str], hint: str = "") -> None:
        self.kind, self.name, self.valid = kind, name, tuple(valid)
        message = f"unknown {kind} {name!r}; use one of: {', '.join(self.valid)}"
        super().__init__(message + (f" {hint}" if hint else ""))


class UsageError(ConfigurationError):
    """A command line or call that cannot run as given (a missing server URL, say).

    >>> UsageError("asker 'llm:direct' needs an LLM server").category
    'usage'
    """

    category = "usage"


class MissingDependency(ConfigurationError):
    """An optional dependency is not installed; the message names the extra to install.

    >>> MissingDependency("pip install ambitab-gym[plots]").category
    'missing_dependency'
    """

    category = "missing_dependency"


class EngineError(AmbiTabError):
    """A database engine failed, refused a query or could not start.

    >>> EngineError("worker died").category
    'engine'
    """

    category = "engine"


class LLMServiceError(AmbiTabError, RuntimeError):
    """A call to an LLM server failed (the base of :class:`ambitab_gym.llm.errors.LLMError`).

    >>> LLMServiceError("503").category
    'llm_error'
    """

    category = "llm_error"


class ConversionError(AmbiTabError):
    """An upstream corpus cannot be converted (the base of ``convert.BuildError``).

    >>> ConversionError("no databases").category
    'conversion'
    """

    category = "conversion"


class StoreError(AmbiTabError):
    """The results file cannot be opened or used.

    >>> StoreError("not a DuckDB file").category
    'store'
    """

    category = "store"


def category_of(error: BaseException) -> str:
    """The failure category of any exception: its ``category`` when it has a non-empty string
    one (every :class:`AmbiTabError`, engine and LLM errors), else its class name.

    This is the one place a failure category is computed (the env's solver failures and the
    campaign engine's asker/oracle failures both call it).

    >>> category_of(EngineError("x")), category_of(ValueError("x"))
    ('engine', 'ValueError')
    """
    category = getattr(error, "category", None)
    if isinstance(category, str) and category:
        return category
    return type(error).__name__
