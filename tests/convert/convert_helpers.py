"""Shared helpers of the converter tests: where the upstream samples are, running the CLI."""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


def schema_only_databases(tables_file: Path, folder: Path) -> Path:
    """``<folder>/<db>/<db>.sqlite`` with the tables of BIRD's tables file and no rows."""
    for entry in json.loads(tables_file.read_text("utf-8")):
        db = entry["db_id"]
        (folder / db).mkdir(parents=True)
        connection = sqlite3.connect(folder / db / f"{db}.sqlite")
        for index, table in enumerate(entry["table_names_original"]):
            columns = [
                f'"{name}" {kind}'
                for (owner, name), kind in zip(
                    entry["column_names_original"], entry["column_types"], strict=True
                )
                if owner == index
            ]
            connection.execute(f'CREATE TABLE "{table}" ({", ".join(columns)})')
        connection.commit()
        connection.close()
    return folder


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


# -- a scripted OpenAI-compatible model server on 127.0.0.1 ------------------------------------


class ModelServer:
    """A real HTTP server answering ``POST /v1/chat/completions`` with ``reply(prompt)``.

    Use as a context manager; ``url`` is the base URL, ``requests`` the decoded request bodies.
    """

    def __init__(self, reply) -> None:
        self.reply = reply
        self.requests: list[dict] = []
        server_self = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server_self.requests.append({"path": self.path, **body})
                content = server_self.reply(body["messages"][-1]["content"])
                data = json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": content}}]}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ModelServer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


SHOP_ROWS = [
    {"question_id": 1, "db_id": "shop", "question": "How many cheap items are there?",
     "evidence": "cheap refers to price < 5", "SQL": "SELECT COUNT(*) FROM items WHERE price < 5",
     "difficulty": "simple"},
    {"question_id": 2, "db_id": "shop", "question": "List the names of items in the toys category.",
     "evidence": "toys category refers to category = 'toys'",
     "SQL": "SELECT name FROM items WHERE category = 'toys'", "difficulty": "simple"},
]  # fmt: skip


def tiny_bird(folder: Path) -> Path:
    """A BIRD-layout ``dev/`` folder (dev.json, dev_databases/shop/shop.sqlite); self-written."""
    dev = folder / "dev"
    (dev / "dev_databases" / "shop").mkdir(parents=True)
    (dev / "dev.json").write_text(json.dumps(SHOP_ROWS))
    connection = sqlite3.connect(dev / "dev_databases" / "shop" / "shop.sqlite")
    connection.executescript(
        "CREATE TABLE items(name TEXT, price REAL, category TEXT);"
        "INSERT INTO items VALUES ('ball', 3.5, 'toys'), ('kite', 12.0, 'toys'),"
        "('pen', 1.2, 'office'), ('desk', 99.0, 'office');"
    )
    connection.commit()
    connection.close()
    return dev


# -- asking the built corpus's deterministic oracle ------------------------------------------


def oracle_credits(folder: Path, record_id: str, question: str) -> frozenset[str]:
    """The ambiguity ids the built corpus's deterministic oracle credits for one question about
    one record (its own oracle: the manifest's ``oracle``)."""
    from ambitab_gym.corpora import load_corpus
    from ambitab_gym.oracles import OracleContext, deterministic_oracle

    corpus = load_corpus(Path(folder))
    (record,) = [r for r in corpus.records if r.id == record_id]
    credits, _ = deterministic_oracle(corpus.manifest.oracle).answer(
        question, OracleContext(record)
    )
    return credits


def occurs(term: str, text: str) -> bool:
    """Whether a term occurs in a text as whole words, case-insensitive (written here, not
    taken from the package, so the tests do not check the package against itself)."""
    import re

    words = [re.escape(w) for w in term.split()]
    return bool(re.search(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", text, re.IGNORECASE))
