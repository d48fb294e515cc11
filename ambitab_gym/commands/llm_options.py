"""Command-line options for LLM parts: the server a client talks to, the LLM oracle's access.

* :func:`add_llm_arguments` and :func:`client_from_args` - ``--llm-url``, ``--model``,
  ``--api-key-env``, ``--concurrency``, ``--llm-timeout``, ``--llm-retries``, ``--temperature``,
  ``--top-p``, ``--sampling ROLE.KEY=VALUE``, ``--llm-log``, ``--llm-cache``, ``--llm-cache-only``,
  ``--structured-output``, ``--no-thinking`` (optionally under a prefix such as ``oracle-``) and
  the :class:`~ambitab_gym.llm.client.LLMClient` they describe.
* :func:`reproducibility_note` - the line saying what makes a rerun of the run reproduce.
* :func:`sampling_from_args`, :func:`parse_sampling_option` - the per-role sampling table.
* :func:`add_oracle_arguments` and :func:`oracle_options_from_args` - ``--oracle-policy``,
  ``--responder-reads-sql``, ``--matcher-reads-dialogue`` and the options of
  :func:`~ambitab_gym.oracles.llm.make_llm_oracle` they describe.
* :data:`URL_ENV`, :data:`KEY_ENV`, :data:`MODEL_ENVS` - the environment variables that stand in
  for ``--llm-url``, the key and ``--model`` (``from_env=True``; see :func:`apply_env_defaults`).
* :func:`preflight` - check each server before a campaign (:meth:`LLMClient.apreflight`), print
  its warnings, and fit the concurrency to a llama.cpp server's slots.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ambitab_gym import defaults
from ambitab_gym.errors import UsageError
from ambitab_gym.llm.client import LLMClient
from ambitab_gym.llm.sampling import ROLES, SAMPLING_KEYS, SamplingTable
from ambitab_gym.oracles.access import ORACLE_POLICY_CHOICES

__all__ = [
    "KEY_ENV",
    "MODEL_ENVS",
    "URL_ENV",
    "add_llm_arguments",
    "add_oracle_arguments",
    "apply_env_defaults",
    "client_from_args",
    "oracle_options_from_args",
    "parse_sampling_option",
    "preflight",
    "reproducibility_note",
    "sampling_from_args",
]

#: The server's base URL when ``--llm-url`` is not given (as the OpenAI SDK reads it).
URL_ENV = "OPENAI_BASE_URL"
#: The variable holding the API key when ``--api-key-env`` is not given.
KEY_ENV = "OPENAI_API_KEY"
#: The model when ``--model`` is not given: the first of these that is set.
MODEL_ENVS = ("AMBITAB_LLM_MODEL", "OPENAI_MODEL")


def apply_env_defaults(args: argparse.Namespace, *, prefix: str = "") -> None:
    """Fill an unset ``--llm-url`` / ``--model`` from :data:`URL_ENV` / :data:`MODEL_ENVS`.

    The namespace is changed in place (so the campaign's identity records the server that was
    used); prefixed options (``oracle-``) fall back to the unprefixed ones and are left alone.

    Example:
        >>> args = argparse.Namespace(llm_url=None, model="given")
        >>> apply_env_defaults(args)  # with OPENAI_BASE_URL unset, the URL stays unset
        >>> args.model
        'given'
    """
    if prefix:
        return
    if not getattr(args, "llm_url", None) and os.environ.get(URL_ENV):
        args.llm_url = os.environ[URL_ENV]
    if not getattr(args, "model", None):
        for name in MODEL_ENVS:
            if os.environ.get(name):
                args.model = os.environ[name]
                break


def add_llm_arguments(parser: argparse.ArgumentParser, *, prefix: str = "") -> None:
    """Add the LLM server options to a command-line parser.

    Options: ``--llm-url``, ``--model``, ``--api-key-env``, ``--concurrency``, ``--llm-timeout``,
    ``--llm-retries``, ``--temperature``, ``--top-p``, ``--structured-output``, ``--no-thinking``.
    An option the parser already has (``--concurrency`` of ``evaluate``, say) is left as it is
    and read from there.

    Args:
        parser: the parser.
        prefix: e.g. ``oracle-`` for a second server (``--oracle-llm-url``, ``--oracle-model``,
            ...); unset prefixed options fall back to the unprefixed ones.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_llm_arguments(parser)
        >>> args = parser.parse_args(["--llm-url", "http://127.0.0.1:8000/v1", "--model", "m",
        ...                           "--no-thinking", "--concurrency", "8"])
        >>> client = client_from_args(args)
        >>> client.model, client.disable_thinking, client.concurrency
        ('m', True, 8)
    """
    existing = set(getattr(parser, "_option_string_actions", {}))
    title = f"LLM server ({prefix.rstrip('-')})" if prefix else "LLM server"
    group = parser.add_argument_group(title)

    def add(name: str, **kwargs: Any) -> None:
        flag = f"--{prefix}{name}"
        if flag not in existing:
            group.add_argument(flag, **kwargs)

    add("llm-url", default=None, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    add("model", default=None, help="the model name the server serves")
    add(
        "api-key-env",
        default=None,
        help=f"environment variable holding the API key (default {KEY_ENV}; an explicitly "
        "named variable must be set)",
    )
    add(
        "concurrency",
        type=int,
        default=None,
        help=f"requests in flight at once (default {defaults.LLM_CONCURRENCY})",
    )
    add(
        "llm-timeout",
        type=float,
        default=None,
        help=f"seconds one request may take (default {defaults.LLM_TIMEOUT_S:g})",
    )
    add(
        "llm-retries",
        type=int,
        default=None,
        help="retries after a timeout, lost connection, 429 or 5xx (default 3)",
    )
    add(
        "temperature",
        type=float,
        default=None,
        help="sampling temperature of every role (default: per role, see --sampling)",
    )
    add("top-p", type=float, default=None, help="nucleus sampling threshold of every role")
    add(
        "sampling",
        type=parse_sampling_option,
        action="append",
        default=None,
        metavar="ROLE.KEY=VALUE",
        help="sampling of one role (asker, matcher, responder, solver, or all): temperature, "
        "top_p, top_k, max_tokens or seed, e.g. solver.max_tokens=2048 or matcher.temperature=0; "
        "repeatable (defaults: paper Table 7; docs/llm.md, 'Sampling')",
    )
    add(
        "llm-log",
        default=None,
        metavar="FILE",
        help="append every LLM call to FILE as JSON lines (prompts, sampling, raw and parsed "
        "reply, attempts, latency, tokens); analyst data: it holds the oracle's privileged prompts",
    )
    add(
        "llm-cache",
        default=None,
        metavar="PATH",
        help="reply cache (an SQLite file, created when missing, shared by every worker): a "
        "request it holds is answered from it without a model call, every new reply is stored, "
        "so a rerun reproduces every reply whatever the server does (docs/llm.md, "
        "'Reproducible reruns'); it holds the oracle's privileged prompts, like --llm-log",
    )
    add(
        "llm-cache-only",
        action="store_true",
        default=None,
        help="answer every LLM call from --llm-cache, never from the server (no pre-flight "
        "check): a request the cache lacks fails the episode (cache_miss); reproduces a "
        "campaign from its cache without a GPU",
    )
    add(
        "structured-output",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="ask for JSON-schema constrained replies (response_format; default on: a server "
        "that rejects it gets plain JSON, logged once); --no-structured-output turns it off",
    )
    add(
        "no-thinking",
        action="store_true",
        default=None,
        help="disable thinking (chat_template_kwargs enable_thinking=false; <think> is stripped)",
    )


_INT_KEYS = ("top_k", "max_tokens", "seed")


def parse_sampling_option(text: str) -> tuple[str, str, Any]:
    """Read one ``--sampling ROLE.KEY=VALUE`` (ROLE: asker, matcher, responder, solver or all;
    KEY: temperature, top_p, top_k, max_tokens, seed; VALUE ``none`` leaves the field out).

    >>> parse_sampling_option("solver.max-tokens=64"), parse_sampling_option("all.top_k=none")
    (('solver', 'max_tokens', 64), ('all', 'top_k', None))
    """
    head, sep, raw = text.partition("=")
    role, dot, key = head.strip().partition(".")
    key = key.strip().replace("-", "_")
    if not sep or not dot or role not in (*ROLES, "all") or key not in SAMPLING_KEYS:
        raise argparse.ArgumentTypeError(
            f"--sampling wants ROLE.KEY=VALUE with ROLE one of {', '.join((*ROLES, 'all'))} and "
            f"KEY one of {', '.join(SAMPLING_KEYS)}, not {text!r}"
        )
    raw = raw.strip()
    if raw.lower() == "none":
        if key == "seed":
            raise argparse.ArgumentTypeError("--sampling: a role's seed cannot be none")
        return role, key, None
    try:
        value: Any = int(raw) if key in _INT_KEYS else float(raw)
    except ValueError:
        kind = "an integer" if key in _INT_KEYS else "a number"
        raise argparse.ArgumentTypeError(f"--sampling {head}: {raw!r} is not {kind}") from None
    return role, key, value


def sampling_from_args(args: argparse.Namespace, *, prefix: str = "") -> SamplingTable:
    """The per-role sampling the options describe: the defaults
    (:data:`~ambitab_gym.llm.sampling.DEFAULT_SAMPLING`), then ``--temperature``/``--top-p`` for
    every role, then ``--sampling all.KEY=VALUE``, then ``--sampling ROLE.KEY=VALUE``.

    >>> parser = argparse.ArgumentParser()
    >>> add_llm_arguments(parser)
    >>> args = parser.parse_args(["--temperature", "0", "--sampling", "solver.temperature=0.2",
    ...                           "--sampling", "all.max_tokens=99"])
    >>> table = sampling_from_args(args)
    >>> table["asker"].temperature, table["solver"].temperature, table["matcher"].max_tokens
    (0.0, 0.2, 99)
    """
    key = prefix.replace("-", "_")

    def get(name: str) -> Any:
        value = getattr(args, f"{key}{name}", None)
        if value is None and key:
            value = getattr(args, name, None)
        return value

    items = list(get("sampling") or [])
    ordered = [i for i in items if i[0] == "all"] + [i for i in items if i[0] != "all"]
    roles: dict[str, dict[str, Any]] = {role: {} for role in ROLES}
    for role, name, value in ordered:
        for target in ROLES if role == "all" else (role,):
            roles[target][name] = value
    return SamplingTable.build(
        roles={role: changes for role, changes in roles.items() if changes},
        temperature=get("temperature"),
        top_p=get("top_p"),
    )


def client_from_args(
    args: argparse.Namespace,
    *,
    prefix: str = "",
    seed: int | None = None,
    from_env: bool = False,
) -> LLMClient | None:
    """The :class:`LLMClient` the options of :func:`add_llm_arguments` describe.

    Args:
        args: parsed arguments.
        prefix: the prefix given to :func:`add_llm_arguments`; unset values fall back to the
            unprefixed options.
        seed: the sampling seed.
        from_env: unset ``--llm-url`` and ``--model`` fall back to :data:`URL_ENV` and
            :data:`MODEL_ENVS` (the commands pass it when a part needs an LLM).

    Returns:
        A client, or None when no server URL was given.

    Raises:
        ValueError: a URL without a model (a :class:`~ambitab_gym.errors.UsageError`); an
            explicitly named ``--api-key-env`` variable that is not set.
    """
    if from_env:
        apply_env_defaults(args, prefix=prefix)
    key = prefix.replace("-", "_")

    def get(name: str) -> Any:
        value = getattr(args, f"{key}{name}", None)
        if value is None and key:
            value = getattr(args, name, None)
        return value

    url = get("llm_url")
    if not url:
        if get("llm_cache_only"):
            raise UsageError(
                f"--{prefix}llm-cache-only needs --{prefix}llm-url and --{prefix}model as the "
                "cached campaign gave them (the server is not contacted)"
            )
        return None
    model = get("model")
    if not model:
        raise UsageError(
            f"--{prefix}llm-url needs --{prefix}model (the model the server serves; or set "
            f"${MODEL_ENVS[0]})"
        )
    cache_path = get("llm_cache")
    if get("llm_cache_only") and not cache_path:
        raise UsageError(f"--{prefix}llm-cache-only needs --{prefix}llm-cache PATH")
    cache = None
    if cache_path:
        from ambitab_gym.llm.cache import ReplyCache  # noqa: PLC0415 - only with a cache

        cache = ReplyCache(cache_path, offline=bool(get("llm_cache_only")))
    key_env = get("api_key_env")
    if key_env and not os.environ.get(key_env):
        raise UsageError(
            f"--{prefix}api-key-env names ${key_env}, which is not set: export {key_env}=<key> "
            f"or drop the option (local servers need no key; the default is ${KEY_ENV})"
        )
    return LLMClient.from_options(
        url,
        model,
        api_key_env=key_env or KEY_ENV,
        concurrency=get("concurrency") or defaults.LLM_CONCURRENCY,
        timeout_s=get("llm_timeout") or defaults.LLM_TIMEOUT_S,
        max_retries=3 if get("llm_retries") is None else get("llm_retries"),
        temperature=get("temperature"),
        top_p=get("top_p"),
        seed=seed,
        disable_thinking=bool(get("no_thinking")),
        structured_output=get("structured_output") is not False,  # default on
        sampling=sampling_from_args(args, prefix=prefix),
        log_path=get("llm_log"),
        cache=cache,
    )


def preflight(clients: list[LLMClient | None], *, concurrency: int, fixed: bool, prog: str) -> int:
    """Check every distinct server before a campaign runs; print the warnings.

    Args:
        clients: the campaign's clients (None entries are skipped).
        concurrency: the episodes in flight the command would use.
        fixed: ``--concurrency`` was given (then it is kept as it is).
        prog: the command's name, for the messages (``ambitab-gym evaluate``).

    Returns:
        The concurrency to use: a llama.cpp server that reports fewer parallel slots than
        ``concurrency`` lowers it to its slots (each client's too), unless it was ``fixed``.

    Raises:
        LLMError: the first server that fails the check (unreachable, key refused, model not
            served); nothing has run yet.
    """
    seen: set[tuple[str, str]] = set()
    for client in clients:
        if client is None or (client.base_url, client.model) in seen:
            continue
        if client.cache is not None and client.cache.offline:
            continue  # --llm-cache-only: no server is asked
        seen.add((client.base_url, client.model))
        info = client.preflight()
        for warning in info.warnings:
            print(f"{prog}: warning: {warning}", file=sys.stderr)
        if info.slots is not None and info.slots < concurrency and not fixed:
            print(
                f"{prog}: {client.base_url} reports {info.slots} parallel slot(s): "
                f"{info.slots} episode(s) in flight instead of {concurrency} "
                "(--concurrency overrides)",
                file=sys.stderr,
            )
            concurrency = info.slots
    for client in clients:
        if client is not None and not fixed:
            client.concurrency = min(client.concurrency, concurrency)
    return concurrency


#: What makes a rerun reproduce without a reply cache (docs/llm.md, "Reproducible reruns").
DETERMINISTIC_SERVERS = (
    "llama.cpp with one slot (-np 1) and prompt caching off (--no-cache-prompt), vLLM with "
    "VLLM_BATCH_INVARIANT=1, SGLang with --enable-deterministic-inference"
)


def reproducibility_note(clients: list[LLMClient | None]) -> str | None:
    """One line saying what makes a rerun of this run give the same LLM replies (None without
    an LLM client).

    >>> print(reproducibility_note([LLMClient("http://127.0.0.1:9/v1", "m")]))
    ... # doctest: +NORMALIZE_WHITESPACE
    no --llm-cache: a rerun reproduces only if the server is deterministic: llama.cpp with one
    slot (-np 1) and prompt caching off (--no-cache-prompt), vLLM with VLLM_BATCH_INVARIANT=1,
    SGLang with --enable-deterministic-inference (docs/llm.md, 'Reproducible reruns')
    """
    present = [client for client in clients if client is not None]
    if not present:
        return None
    caches = {
        str(client.cache.path): client.cache for client in present if client.cache is not None
    }
    if not caches:
        return (
            "no --llm-cache: a rerun reproduces only if the server is deterministic: "
            f"{DETERMINISTIC_SERVERS} (docs/llm.md, 'Reproducible reruns')"
        )
    parts = []
    for path, cache in caches.items():
        if cache.offline:
            parts.append(f"replies come from the cache {path} only (--llm-cache-only)")
        else:
            parts.append(
                f"replies come from/go to the cache {path} ({len(cache)} stored): a rerun "
                "with it reproduces them"
            )
    if len(caches) < len(present):
        parts.append("a client without --llm-cache reproduces only on a deterministic server")
    return "LLM " + "; ".join(parts)


def add_oracle_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the LLM oracle's access options to a command-line parser.

    ``--oracle-policy auto|scoped|unfiltered`` (auto: scoped on intent corpora, unfiltered on
    knowledge corpora, as paper Table 6 pairs them), ``--responder-reads-sql`` /
    ``--no-responder-reads-sql`` (default: the policy's), ``--matcher-reads-dialogue``.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_oracle_arguments(parser)
        >>> oracle_options_from_args(parser.parse_args(["--oracle-policy", "unfiltered",
        ...                                             "--no-responder-reads-sql"]))
        {'policy': 'unfiltered', 'responder_reads_sql': False}
    """
    group = parser.add_argument_group("LLM oracle")
    group.add_argument(
        "--oracle-policy",
        choices=ORACLE_POLICY_CHOICES,
        default="auto",
        help="what the LLM oracle may read (default auto: scoped on intent corpora, "
        "unfiltered on knowledge corpora)",
    )
    group.add_argument(
        "--responder-reads-sql",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the LLM responder reads the reference SQL (default: off scoped, on unfiltered)",
    )
    group.add_argument(
        "--matcher-reads-dialogue",
        action="store_true",
        help="the LLM matcher reads the earlier dialogue, not only the current question",
    )


def oracle_options_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The :func:`~ambitab_gym.oracles.llm.make_llm_oracle` options of :func:`add_oracle_arguments`
    (unset ones left out).

    Returns:
        Keyword options for the oracle factory (``policy``, ``responder_reads_sql``,
        ``matcher_reads_dialogue``).
    """
    options: dict[str, Any] = {"policy": getattr(args, "oracle_policy", None) or "auto"}
    if getattr(args, "responder_reads_sql", None) is not None:
        options["responder_reads_sql"] = args.responder_reads_sql
    if getattr(args, "matcher_reads_dialogue", False):
        options["matcher_reads_dialogue"] = True
    return options
