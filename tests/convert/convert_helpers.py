"""Shared helpers of the converter tests: where the upstream samples are, running the CLI."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from ambitab_gym.cli import main

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = REPO.parent / "shared" / "upstream"


def upstream(*parts: str) -> Path:
    """A path under ``../shared/upstream``; skips the test when it is absent."""
    path = UPSTREAM.joinpath(*parts)
    if not path.exists():
        pytest.skip(
            f"upstream sample {path} is absent (the converter integration tests read the real "
            "upstream samples from ../shared/upstream relative to the repository root)"
        )
    return path


def run_build(*args: str) -> tuple[int, dict]:
    """Run ``ambitab-gym build ... --json``; returns the exit status and the last JSON line."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        status = main(["build", *args, "--json"])
    out = buffer.getvalue().strip().splitlines()
    assert out, "build --json printed nothing on stdout"
    return status, json.loads(out[-1])


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def tree_bytes(folder: Path) -> dict[str, bytes]:
    """Every file of a folder (relative path -> bytes)."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }
