"""Write-through persistence: one SQLite file (WAL), so a restart or a kill loses nothing.

The store keeps everything in memory and writes each change here inside one transaction;
SQLite makes every write atomic. Without a state file the database lives in memory.
"""

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterator

SCHEMA = """
CREATE TABLE IF NOT EXISTS docs (
  kind TEXT NOT NULL, id TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (kind, id));
CREATE TABLE IF NOT EXISTS logs (
  job_id TEXT NOT NULL, step INTEGER NOT NULL, n INTEGER NOT NULL, t TEXT NOT NULL,
  l TEXT NOT NULL, PRIMARY KEY (job_id, step, n));
CREATE TABLE IF NOT EXISTS files (
  org TEXT NOT NULL, path TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (org, path));
"""


class Db:
    def __init__(self, path: str | None) -> None:
        if path:
            # Create it 0600 before SQLite does: it holds token hashes and the OIDC issuer key.
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
            os.chmod(path, 0o600)
        self.conn = sqlite3.connect(path or ":memory:", isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL survives a process kill
        self.conn.executescript(SCHEMA)
        self._in_tx = False

    @contextlib.contextmanager
    def tx(self) -> Iterator[None]:
        if self._in_tx:
            yield
            return
        self.conn.execute("BEGIN IMMEDIATE")
        self._in_tx = True
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        else:
            self.conn.execute("COMMIT")
        finally:
            self._in_tx = False

    def put(self, kind: str, id_: str, doc: object) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO docs (kind, id, doc) VALUES (?, ?, ?)",
            (kind, id_, json.dumps(doc, separators=(",", ":"))),
        )

    def delete(self, kind: str, id_: str | None = None) -> None:
        if id_ is None:
            self.conn.execute("DELETE FROM docs WHERE kind = ?", (kind,))
        else:
            self.conn.execute("DELETE FROM docs WHERE kind = ? AND id = ?", (kind, id_))

    def docs(self, kind: str) -> list:
        rows = self.conn.execute("SELECT doc FROM docs WHERE kind = ?", (kind,))
        return [json.loads(doc) for (doc,) in rows]

    def get(self, kind: str, id_: str) -> object | None:
        row = self.conn.execute(
            "SELECT doc FROM docs WHERE kind = ? AND id = ?", (kind, id_)
        ).fetchone()
        return json.loads(row[0]) if row else None

    def add_logs(self, job_id: str, step: int, start: int, lines: list[list[str]]) -> None:
        self.conn.executemany(
            "INSERT INTO logs (job_id, step, n, t, l) VALUES (?, ?, ?, ?, ?)",
            [(job_id, step, start + i, t, text) for i, (t, text) in enumerate(lines)],
        )

    def drop_logs(self, job_id: str | None = None) -> None:
        if job_id is None:
            self.conn.execute("DELETE FROM logs")
        else:
            self.conn.execute("DELETE FROM logs WHERE job_id = ?", (job_id,))

    def all_logs(self) -> Iterator[tuple[str, int, str, str]]:
        yield from self.conn.execute("SELECT job_id, step, t, l FROM logs ORDER BY job_id, step, n")

    def put_file(self, org: str, path: str, data: bytes) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO files (org, path, data) VALUES (?, ?, ?)", (org, path, data)
        )

    def delete_file(self, org: str, path: str) -> None:
        self.conn.execute("DELETE FROM files WHERE org = ? AND path = ?", (org, path))

    def drop_files(self) -> None:
        self.conn.execute("DELETE FROM files")

    def all_files(self) -> Iterator[tuple[str, str, bytes]]:
        yield from self.conn.execute("SELECT org, path, data FROM files ORDER BY org, path")

    def close(self) -> None:
        self.conn.close()
