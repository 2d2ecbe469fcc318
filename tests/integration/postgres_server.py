"""A private PostgreSQL server from Debian's package for the tests: loopback only, a random port and password.

Runs as the package's `postgres` user (initdb refuses root) in a temporary data directory; the password is made
here, reaches initdb through a 0600 file and psql/pulumi through PGPASSWORD, never a command line.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

USER = "postgres"
READY_TIMEOUT_S = 30


@dataclass(frozen=True)
class PostgresServer:
    port: int
    password: str = field(repr=False)  # kept out of test failure reports
    database: str

    @property
    def env(self) -> dict[str, str]:
        """What a client needs besides the URL: the password, as libpq and Pulumi's backend read it."""
        return {"PGPASSWORD": self.password}

    @property
    def url(self) -> str:
        """The DIY backend URL `pulumi login` takes (no password in it: PGPASSWORD carries it)."""
        return f"postgres://{USER}@127.0.0.1:{self.port}/{self.database}?sslmode=disable"

    def query(self, sql: str) -> str:
        """One statement through psql over TCP, its unaligned rows."""
        psql = [bin_dir() / "psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, "-d", self.database]
        result = subprocess.run(
            [*map(str, psql), "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
            capture_output=True,
            text=True,
            timeout=30,
            env=dict(os.environ, **self.env),
            check=True,
        )
        return result.stdout.strip()


def bin_dir() -> Path:
    """The newest installed server's binaries (Debian keeps them off PATH: /usr/lib/postgresql/<major>/bin)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise AssertionError("no PostgreSQL server installed: run tools/system-deps.sh (apt-get install postgresql)")
    return Path(found[-1]).parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def as_postgres(*cmd: str | Path) -> list[str]:
    return ["runuser", "-u", USER, "--", *map(str, cmd)]


@contextmanager
def postgres_server(database: str = "pulumi") -> Iterator[PostgresServer]:
    """A running server with an empty database; stopped and its data removed afterwards."""
    binaries = bin_dir()
    root = Path(tempfile.mkdtemp(prefix="spark-llm-pg-"))
    shutil.chown(root, USER, USER)
    data, sockets, pwfile = root / "data", root / "sockets", root / "pwfile"
    sockets.mkdir()
    shutil.chown(sockets, USER, USER)
    password = secrets.token_urlsafe(24)
    pwfile.touch(mode=0o600)
    pwfile.write_text(password + "\n")
    shutil.chown(pwfile, USER, USER)
    server: subprocess.Popen[str] | None = None
    try:
        initdb = [binaries / "initdb", "-D", data, "-U", USER, "--pwfile", pwfile, "-A", "scram-sha-256"]
        subprocess.run(as_postgres(*initdb, "--no-sync"), capture_output=True, text=True, check=True, timeout=120)
        pwfile.unlink()
        port = free_port()
        server = subprocess.Popen(
            as_postgres(
                binaries / "postgres", "-D", data, "-p", str(port), "-k", sockets, "-c", "listen_addresses=127.0.0.1"
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        ready = [binaries / "pg_isready", "-h", "127.0.0.1", "-p", str(port), "-q"]
        deadline = time.monotonic() + READY_TIMEOUT_S
        while subprocess.run(list(map(str, ready))).returncode != 0:
            if server.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"PostgreSQL did not answer on 127.0.0.1:{port}: {server.stderr.read()[-2000:]}")
            time.sleep(0.2)
        admin = PostgresServer(port=port, password=password, database="postgres")
        admin.query(f"CREATE DATABASE {database}")
        yield PostgresServer(port=port, password=password, database=database)
    finally:
        if server is not None:
            server.terminate()  # SIGTERM: PostgreSQL's "smart" shutdown
            server.wait(timeout=60)
        shutil.rmtree(root, ignore_errors=True)
