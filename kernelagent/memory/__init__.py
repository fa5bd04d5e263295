"""Memory: the SQLite record of problems, runs and verified attempts, and what the agent recalls from it."""

from kernelagent.memory.db import StoreBusyError, StoreError
from kernelagent.memory.retrieval import lessons, similar_accepted
from kernelagent.memory.store import AmbiguousIdError, Store, default_home, open_store, source_sha256

__all__ = [
    "AmbiguousIdError", "Store", "StoreBusyError", "StoreError", "default_home", "lessons", "open_store",
    "similar_accepted", "source_sha256",
]
