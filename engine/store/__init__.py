"""The per-user study store (engine/store/store.py)."""

from engine.store.store import (
    DEFAULT,
    ENV,
    SqlAlchemyStore,
    SqliteStore,
    Store,
    Stored,
    StoredFile,
    StoreError,
    open_store,
    sha256_of,
    store_location,
)

__all__ = [
    "DEFAULT",
    "ENV",
    "SqlAlchemyStore",
    "SqliteStore",
    "Store",
    "StoreError",
    "Stored",
    "StoredFile",
    "open_store",
    "sha256_of",
    "store_location",
]
