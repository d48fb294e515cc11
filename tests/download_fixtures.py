"""A real HTTP server on 127.0.0.1 and upstream-layout archives built at test time.

* :class:`MirrorServer` - stdlib ``http.server`` in a thread, serving bytes by path with
  ``Range`` support (206, ``Content-Range``, 416), an optional early close of one response
  (``truncate[path] = N``: the headers promise every byte, the body stops after N and the
  connection closes), paths that ignore ``Range`` (``ignore_range``), and a log of every request (path, Range header, status, bytes sent).
* Archive builders, each in the layout its upstream ships, from the real samples under
  ``../shared/upstream`` (never copied into the repository): :func:`ambiqt_zip` (GitHub's
  ``AmbiQT-<commit>/`` archive), :func:`spider_zip` (``spider/database/<db>/<db>.sqlite``,
  with macOS ``__MACOSX`` debris), :func:`bird_dev_zip` (``dev_20240627/`` with the nested
  ``dev_databases.zip``), :func:`hub_tree` (a Hugging Face dataset: its tree listing with
  LFS SHA-256 and git blob ids), plus Ambrosia's CSV and TACO's tree from the converter
  fixtures in ``tests/convert``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import re
import sqlite3
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = ROOT.parent / "shared" / "upstream"
AMBIQT = UPSTREAM / "ambiqt"
MINI_INTERACT = UPSTREAM / "bird_interact" / "mini_interact"
BIRD = UPSTREAM / "bird"

_RANGE = re.compile(r"bytes=(\d+)-$")


class MirrorServer:
    """Serve ``files`` (path -> bytes) on 127.0.0.1 until :meth:`close`.

    Example:
        >>> with MirrorServer() as server:  # doctest: +SKIP
        ...     server.files["/a/b.zip"] = b"..."
    """

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.content_types: dict[str, str] = {}
        self.truncate: dict[str, int] = {}
        self.ignore_range: set[str] = set()
        self.log: list[dict] = []
        mirror = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                path = urlsplit(self.path).path
                requested = self.headers.get("Range")
                entry = {"path": path, "range": requested, "status": 404, "sent": 0}
                mirror.log.append(entry)
                body = mirror.files.get(path)
                if body is None:
                    self.send_error(404)
                    return
                total = len(body)
                start = 0
                match = None if path in mirror.ignore_range else _RANGE.match(requested or "")
                if match:
                    start = int(match.group(1))
                    if start >= total:
                        entry["status"] = 416
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{total}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{total - 1}/{total}")
                    entry["status"] = 206
                else:
                    self.send_response(200)
                    entry["status"] = 200
                self.send_header(
                    "Content-Type", mirror.content_types.get(path, "application/octet-stream")
                )
                self.send_header("Content-Length", str(total - start))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()
                payload = body[start:]
                cut = mirror.truncate.pop(path, None)
                if cut is not None:
                    payload = payload[:cut]
                self.wfile.write(payload)
                self.wfile.flush()
                entry["sent"] = len(payload)
                if cut is not None:
                    self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def requests(self, path: str) -> list[dict]:
        return [e for e in self.log if e["path"] == path]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> MirrorServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _zip(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def ambiqt_zip(commit: str) -> bytes:
    """GitHub's archive of the AmbiQT checkout: everything under ``AmbiQT-<commit>/``."""
    entries = {f"AmbiQT-{commit}/README.md": b"# AmbiQT (test fixture)\n"}
    for name, data in _tree(AMBIQT / "AmbiQT").items():
        entries[f"AmbiQT-{commit}/{name}"] = data
    return _zip(entries)


def spider_zip() -> bytes:
    """Spider 1.0's ``spider.zip``: ``spider/database/<db>/<db>.sqlite`` and ``tables.json``."""
    entries = {"__MACOSX/spider/._tables.json": b"\x00\x05\x16\x07"}
    for name, data in _tree(AMBIQT / "spider").items():
        entries[f"spider/{name}"] = data
    entries["spider/tables.json"] = (AMBIQT / "AmbiQT" / "spider" / "tables.json").read_bytes()
    return _zip(entries)


def bird_dev_zip(tmp: Path) -> bytes:
    """BIRD's ``dev.zip``: ``dev_20240627/`` with task files and a nested
    ``dev_databases.zip`` (schema-only databases from ``dev_tables.json``: no BIRD database
    file is available here)."""
    tables = json.loads((BIRD / "dev" / "dev_tables.json").read_text("utf-8"))
    databases = {}
    for entry in tables:
        db = entry["db_id"]
        path = tmp / f"{db}.sqlite"
        with sqlite3.connect(path) as connection:
            for index, table in enumerate(entry["table_names_original"]):
                columns = [c for t, c in entry["column_names_original"] if t == index]
                quoted = ", ".join(f'"{c}"' for c in columns) or '"x"'
                connection.execute(f'CREATE TABLE "{table}" ({quoted})')
        connection.close()
        databases[f"dev_databases/{db}/{db}.sqlite"] = path.read_bytes()
    return _zip(
        {
            "dev_20240627/dev.json": (BIRD / "dev" / "dev.json").read_bytes(),
            "dev_20240627/dev_tables.json": (BIRD / "dev" / "dev_tables.json").read_bytes(),
            "dev_20240627/dev_databases.zip": _zip(databases),
        }
    )


def hub_tree(folder: Path, lfs_suffixes: tuple[str, ...] = (".sqlite",)) -> tuple[list, dict]:
    """A Hugging Face dataset repository from ``folder``: the tree API's listing (files with
    ``lfs.oid`` = SHA-256 for large files, git blob ``oid`` for the others) and path -> bytes."""
    listing, files = [], {}
    for name, data in _tree(folder).items():
        entry = {
            "type": "file",
            "path": name,
            "size": len(data),
            "oid": hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest(),
        }
        if name.endswith(lfs_suffixes):
            entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data)}
        listing.append(entry)
        files[name] = data
    return listing, files


def _load(name: str):
    path = ROOT / "tests" / "convert" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"download_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ambrosia_csv(folder: Path) -> Path:
    """Ambrosia's CSV in the upstream columns (the converter tests' fixture)."""
    return _load("ambrosia_fixture").write_ambrosia_csv(folder)


def taco_zip(tmp: Path) -> bytes:
    """TACO-Benchmark's tree (the converter tests' fixture) as one archive."""
    root = _load("taco_fixture").write_taco(tmp / "TACO-Benchmark")
    return _zip({f"TACO-Benchmark/{k}": v for k, v in _tree(root).items()})


#: A fictional BIRD database per split (no BIRD database file is available here): questions with
#: evidence in BIRD's form, whose reference SQL returns rows.
_BIRD_FICTION = {
    "dev": (
        "heroes",
        "CREATE TABLE superhero (id INTEGER PRIMARY KEY, superhero_name TEXT, height_cm INTEGER,"
        " eye_colour TEXT);"
        "INSERT INTO superhero VALUES (1, 'Aqua', 190, 'Blue'), (2, 'Bolt', 170, 'Green'),"
        " (3, 'Cinder', 185, 'Blue'), (4, 'Dune', 160, 'Brown');",
        [
            ("How many superheroes are tall?", "tall refers to height_cm > 180",
             "SELECT COUNT(*) FROM superhero WHERE height_cm > 180"),
            ("List the superhero names of heroes with blue eyes.",
             "blue eyes refers to eye_colour = 'Blue'",
             "SELECT superhero_name FROM superhero WHERE eye_colour = 'Blue'"),
        ],
    ),
    "train": (
        "shops",
        "CREATE TABLE shop (id INTEGER PRIMARY KEY, shop_name TEXT, area INTEGER);"
        "INSERT INTO shop VALUES (1, 'Acme', 120), (2, 'Bazaar', 80), (3, 'Corner', 150);",
        [
            ("Which shops are large?", "large refers to area > 100",
             "SELECT shop_name FROM shop WHERE area > 100"),
        ],
    ),
}  # fmt: skip


def bird_zip(split: str, tmp: Path) -> bytes:
    """BIRD's ``dev.zip`` (top folder ``dev_20240627/``) or ``train.zip`` (``train/``): task
    JSON and a nested ``<split>_databases.zip``, over a fictional database with rows."""
    db, script, questions = _BIRD_FICTION[split]
    path = tmp / f"{split}-{db}.sqlite"
    connection = sqlite3.connect(path)
    connection.executescript(script)
    connection.commit()
    connection.close()
    tasks = [
        {"question_id": i, "db_id": db, "question": q, "evidence": e, "SQL": s,
         "difficulty": "simple"}
        for i, (q, e, s) in enumerate(questions)
    ]  # fmt: skip
    top = "dev_20240627" if split == "dev" else "train"
    return _zip(
        {
            f"{top}/{split}.json": json.dumps(tasks, indent=1).encode(),
            f"{top}/{split}_tables.json": b"[]",
            f"{top}/{split}_databases.zip": _zip(
                {f"{split}_databases/{db}/{db}.sqlite": path.read_bytes()}
            ),
        }
    )
