"""Subcommands of ``ambitab-gym``: one module each, each with ``register(subparsers)``."""
