"""Command-line options for LLM parts: the server a client talks to, the LLM oracle's access.

* :func:`add_llm_arguments` and :func:`client_from_args` - ``--llm-url``, ``--model``,
  ``--api-key-env``, ``--concurrency``, ``--llm-timeout``, ``--llm-retries``, ``--temperature``,
  ``--top-p``, ``--structured-output``, ``--no-thinking`` (optionally under a prefix such as
  ``oracle-``) and the :class:`~ambitab_gym.llm.client.LLMClient` they describe.
* :func:`add_oracle_arguments` and :func:`oracle_options_from_args` - ``--oracle-policy``,
  ``--responder-reads-sql``, ``--matcher-reads-dialogue`` and the options of
  :func:`~ambitab_gym.oracles.llm.make_llm_oracle` they describe.
* :data:`DEFAULT_CONCURRENCY` - requests in flight when ``--concurrency`` is not given.
"""

from __future__ import annotations

import argparse
from typing import Any

from ambitab_gym.llm.client import DEFAULT_CONCURRENCY, LLMClient
from ambitab_gym.oracles.access import ORACLE_POLICY_CHOICES

__all__ = [
    "DEFAULT_CONCURRENCY",
    "add_llm_arguments",
    "add_oracle_arguments",
    "client_from_args",
    "oracle_options_from_args",
]


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
        help="environment variable holding the API key (default OPENAI_API_KEY)",
    )
    add(
        "concurrency",
        type=int,
        default=None,
        help=f"requests in flight at once (default {DEFAULT_CONCURRENCY})",
    )
    add("llm-timeout", type=float, default=None, help="seconds one request may take (default 120)")
    add(
        "llm-retries",
        type=int,
        default=None,
        help="retries after a timeout, lost connection, 429 or 5xx (default 3)",
    )
    add("temperature", type=float, default=None, help="sampling temperature")
    add("top-p", type=float, default=None, help="nucleus sampling threshold")
    add(
        "structured-output",
        action="store_true",
        default=None,
        help="ask for JSON-schema constrained replies (response_format); helps small models",
    )
    add(
        "no-thinking",
        action="store_true",
        default=None,
        help="disable thinking (chat_template_kwargs enable_thinking=false; <think> is stripped)",
    )


def client_from_args(
    args: argparse.Namespace, *, prefix: str = "", seed: int | None = None
) -> LLMClient | None:
    """The :class:`LLMClient` the options of :func:`add_llm_arguments` describe.

    Args:
        args: parsed arguments.
        prefix: the prefix given to :func:`add_llm_arguments`; unset values fall back to the
            unprefixed options.
        seed: the sampling seed.

    Returns:
        A client, or None when no ``--llm-url`` was given.

    Raises:
        ValueError: a URL without a model.
    """
    key = prefix.replace("-", "_")

    def get(name: str) -> Any:
        value = getattr(args, f"{key}{name}", None)
        if value is None and key:
            value = getattr(args, name, None)
        return value

    url = get("llm_url")
    if not url:
        return None
    model = get("model")
    if not model:
        raise ValueError(f"--{prefix}llm-url needs --{prefix}model (the model the server serves)")
    return LLMClient.from_options(
        url,
        model,
        api_key_env=get("api_key_env") or "OPENAI_API_KEY",
        concurrency=get("concurrency") or DEFAULT_CONCURRENCY,
        timeout_s=get("llm_timeout") or 120.0,
        max_retries=3 if get("llm_retries") is None else get("llm_retries"),
        temperature=get("temperature"),
        top_p=get("top_p"),
        seed=seed,
        disable_thinking=bool(get("no_thinking")),
        structured_output=bool(get("structured_output")),
    )


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
