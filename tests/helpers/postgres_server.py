"""A real PostgreSQL server on a free loopback port, for the ledger tests: ``initdb``
into a temporary directory, no durability (fsync off: tests only), stopped (and its
directory removed) when the session is done. ``stop``/``start`` make an outage.

PostgreSQL refuses to run as root: under root the server runs as the ``postgres``
system user (Debian's package makes it), its directory owned by that user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from .redis_server import _free_port


def _bin_dir() -> str | None:
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _answers(port: int) -> bool:
    try:
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", connect_timeout=1):
            return True
    except Exception:
        return False


@dataclass
class PostgresServer:
    bin_dir: str
    root: str
    port: int
    user: dict[str, Any] = field(default_factory=dict)  # Popen's user/group, under root
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def schema_url(self, schema: str) -> str:
        """A URL whose tables go in their own schema (a clean ledger per test)."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as db:
            db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            db.execute(f"CREATE SCHEMA {schema}")
        return f"{self.url}?options=-csearch_path%3D{schema}"

    def start(self) -> None:
        args = [
            f"{self.bin_dir}/postgres",
            "-D",
            f"{self.root}/data",
            "-p",
            str(self.port),
            "-k",
            self.root,
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
        ]
        self.process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.root, **self.user
        )
        deadline = time.monotonic() + 20
        while not _answers(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("postgres did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        """A fast shutdown: clients are disconnected at once."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextlib.contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    bin_dir = _bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (scripts/install-test-deps.sh installs it)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed (pip install -e '.[test]')")
    root = tempfile.mkdtemp(prefix="proxai-pg-")
    user: dict[str, Any] = {}
    if os.getuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(root, pw.pw_uid, pw.pw_gid)
        user = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
    server = PostgresServer(bin_dir, root, _free_port(), user)
    try:
        subprocess.run(
            [f"{bin_dir}/initdb", "-D", f"{root}/data", "-A", "trust", "-U", "postgres", "-N"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=root,
            **user,
        )
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
