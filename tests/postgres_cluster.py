"""A throwaway PostgreSQL cluster for tests (docs/design.md section 10, Tests with real parts).

* :class:`PostgresCluster` - ``initdb`` + ``pg_ctl start`` in a temporary folder, on a free
  loopback port with its unix socket in the same folder; ``stop()`` removes everything.
* :func:`find_postgres_bin` - the folder holding ``initdb``, ``pg_ctl`` and ``postgres``.
* :func:`postgres_cluster` - a session-wide pytest fixture (one cluster per test session, shared
  by every test module that imports it); skips with the reason when no server binaries exist.

``initdb`` refuses to run as root, so as root every server command runs as the ``postgres``
user through ``runuser`` and the temporary folder is handed to that user.

Use it from a test module::

    from postgres_cluster import postgres_cluster  # noqa: F401  (the fixture)

    def test_something(postgres_cluster):
        dsn = postgres_cluster.dsn()
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

__all__ = ["PostgresCluster", "PostgresUnavailable", "find_postgres_bin", "postgres_cluster"]

_TOOLS = ("initdb", "pg_ctl", "postgres")
_SERVER_SETTINGS = (
    "-c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off "
    "-c synchronous_commit=off -c max_connections=40 -c shared_buffers=32MB "
    "-c log_min_messages=warning"
)


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server can be started here (the message says why)."""


def find_postgres_bin() -> Path | None:
    """The folder with ``initdb``, ``pg_ctl`` and ``postgres`` (PostgreSQL 15 preferred).

    Returns:
        The folder, or None when the server binaries are not installed.
    """
    candidates: list[Path] = []
    env = os.environ.get("AMBITAB_PG_BIN")
    if env:
        candidates.append(Path(env))
    found = shutil.which("initdb")
    if found:
        candidates.append(Path(os.path.realpath(found)).parent)
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: (Path(p).parent.name != "15", -_version(Path(p).parent.name)),
    )
    candidates.extend(Path(p) for p in versions)
    for folder in candidates:
        if all((folder / tool).is_file() and os.access(folder / tool, os.X_OK) for tool in _TOOLS):
            return folder
    return None


def _version(name: str) -> int:
    try:
        return int(name)
    except ValueError:
        return 0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresCluster:
    """A PostgreSQL cluster in a temporary folder, reachable on 127.0.0.1 with trust auth.

    Args:
        bin_dir: the server binaries (default :func:`find_postgres_bin`).
        superuser: the bootstrap superuser's name.

    Raises:
        PostgresUnavailable: no binaries, or running as root without a ``postgres`` user.

    Example:
        >>> cluster = PostgresCluster()  # doctest: +SKIP
        >>> cluster.start()  # doctest: +SKIP
        >>> cluster.dsn()  # doctest: +SKIP
        'host=127.0.0.1 port=... user=postgres dbname=postgres'
        >>> cluster.stop()  # doctest: +SKIP
    """

    def __init__(self, bin_dir: str | Path | None = None, *, superuser: str = "postgres") -> None:
        folder = Path(bin_dir) if bin_dir else find_postgres_bin()
        if folder is None:
            raise PostgresUnavailable(
                "PostgreSQL server binaries (initdb, pg_ctl, postgres) were not found; install "
                "postgresql-15 or set AMBITAB_PG_BIN to their folder"
            )
        self.bin_dir = folder
        self.superuser = superuser
        self._run_as: list[str] = []
        self._owner: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            try:
                self._owner = pwd.getpwnam("postgres")
            except KeyError:
                raise PostgresUnavailable(
                    "running as root, and initdb refuses root: a 'postgres' system user is needed"
                ) from None
            runuser = shutil.which("runuser")
            if runuser is None:
                raise PostgresUnavailable("running as root, but `runuser` is not available")
            self._run_as = [runuser, "-u", "postgres", "--"]
        self.port = 0
        self.base: Path | None = None
        self.running = False

    @property
    def data_dir(self) -> Path:
        assert self.base is not None
        return self.base / "data"

    def _run(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
        command = [*self._run_as, *args]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise PostgresUnavailable(
                f"{' '.join(args[:2])} failed (exit {result.returncode}): "
                f"{(result.stderr or result.stdout).strip()[-2000:]}"
            )
        return result

    def start(self) -> PostgresCluster:
        """initdb and start the server; returns self."""
        self.base = Path(tempfile.mkdtemp(prefix="ambitab-pg-"))
        if self._owner is not None:
            os.chown(self.base, self._owner.pw_uid, self._owner.pw_gid)
        try:
            self._run(
                str(self.bin_dir / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                self.superuser,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            )
            self.port = _free_port()
            options = f"-p {self.port} -k {self.base} {_SERVER_SETTINGS}"
            self._run(
                str(self.bin_dir / "pg_ctl"),
                "start",
                "-D",
                str(self.data_dir),
                "-w",
                "-t",
                "60",
                "-l",
                str(self.base / "server.log"),
                "-o",
                options,
                timeout=90.0,
            )
        except BaseException:
            self._remove()
            raise
        self.running = True
        return self

    def dsn(self, dbname: str = "postgres", user: str | None = None) -> str:
        """A libpq connection string for a database of this cluster."""
        return f"host=127.0.0.1 port={self.port} user={user or self.superuser} dbname={dbname}"

    def log(self) -> str:
        """The server log (for failure messages)."""
        if self.base is None:
            return ""
        path = self.base / "server.log"
        return path.read_text(errors="replace") if path.is_file() else ""

    def stop(self) -> None:
        """Stop the server (immediate mode) and delete its folder."""
        if self.running:
            with contextlib.suppress(Exception):
                self._run(
                    str(self.bin_dir / "pg_ctl"),
                    "stop",
                    "-D",
                    str(self.data_dir),
                    "-m",
                    "immediate",
                    "-w",
                )
            self.running = False
        self._remove()

    def _remove(self) -> None:
        if self.base is not None:
            shutil.rmtree(self.base, ignore_errors=True)
            self.base = None

    def __enter__(self) -> PostgresCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_STASH_KEY = pytest.StashKey["PostgresCluster | str"]()


@pytest.fixture(scope="session")
def postgres_cluster(request: pytest.FixtureRequest) -> PostgresCluster:
    """One running :class:`PostgresCluster` for the whole test session (skips when impossible).

    The cluster lives in the pytest config's stash, so test modules that each import this
    fixture still share a single server; it is stopped when the session ends.
    """
    stash = request.config.stash
    cluster = stash.get(_STASH_KEY, None)
    if cluster is None:
        try:
            cluster = PostgresCluster().start()
        except PostgresUnavailable as error:
            cluster = str(error)
        else:
            request.config.add_cleanup(cluster.stop)
        stash[_STASH_KEY] = cluster
    if isinstance(cluster, str):
        pytest.skip(f"no PostgreSQL server for this test: {cluster}")
    return cluster
