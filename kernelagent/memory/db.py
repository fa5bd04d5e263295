"""Opening the memory database: WAL journal, a busy timeout, and write transactions retried on SQLITE_BUSY.

Several processes (batch workers, one per GPU) write into the same file, so every write goes through
`transact`, which takes the write lock up front (BEGIN IMMEDIATE) and retries if the lock stays busy.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import sqlite_utils

BUSY_TIMEOUT_S = 30.0  # sqlite's own wait for a lock before it reports SQLITE_BUSY
RETRIES = 8  # our retries on top of that, with jittered backoff
_BUSY_CODES = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}

T = TypeVar("T")


class StoreError(Exception):
    """Base class for failures of the memory store."""


class StoreBusyError(StoreError):
    """The database stayed locked by other writers through every retry."""


def is_busy(error: sqlite3.Error) -> bool:
    """True when `error` means another connection holds the lock (worth retrying)."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _BUSY_CODES
    text = str(error).lower()
    return "database is locked" in text or "database is busy" in text


def retry_busy(fn: Callable[[], T], retries: int = RETRIES) -> T:
    """Call `fn`, retrying with jittered exponential backoff while SQLite reports the db busy."""
    for attempt in range(retries + 1):
        try:
            return fn()
        except sqlite3.OperationalError as error:
            if not is_busy(error) or attempt == retries:
                if is_busy(error):
                    message = f"database stayed locked after {retries} retries: {error}"
                    raise StoreBusyError(message) from error
                raise
            time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


def transact(db: sqlite_utils.Database, fn: Callable[[sqlite_utils.Database], T]) -> T:
    """Run `fn(db)` in one write transaction (BEGIN IMMEDIATE ... COMMIT), retried whole on SQLITE_BUSY.

    Inside a transaction the caller already holds, `fn` simply joins it.
    """
    if db.conn.in_transaction:
        return fn(db)

    def once() -> T:
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(db)
            db.conn.execute("COMMIT")
        except BaseException:
            if db.conn.in_transaction:
                db.conn.execute("ROLLBACK")
            raise
        return result

    return retry_busy(once)


def open_db(path: Path | str) -> sqlite_utils.Database:
    """Open (creating if needed) the SQLite file at `path` in WAL mode with a busy timeout."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, check_same_thread=False)
    db = sqlite_utils.Database(conn, execute_plugins=False)
    retry_busy(db.enable_wal)
    # In WAL mode NORMAL survives a killed process; only an OS crash can drop the last commits.
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")
    return db
