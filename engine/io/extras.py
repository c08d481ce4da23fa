"""The optional extras of the distribution (issue 38, finding 5): the heavy parts install apart.

`pip install cohortshield` is the core; `cohortshield[vae]` adds torch (the lab-order autoencoder,
Johnson 2018), `[scale]` Dask (sharded risk on a cluster), `[db]` SQLAlchemy and psycopg (database
URLs), `[all]` the three; `make run` and `make test` install everything (requirements.txt). Code that
needs an extra calls `require` where it first needs it, so a missing extra is refused by name (a
`UserError`: one line, exit 2 on the CLI, a message in the app), never an ImportError's traceback.
"""

from __future__ import annotations

import importlib.util

from engine.io.errors import UserError

# extra -> the modules it installs (pyproject.toml's [project.optional-dependencies])
EXTRAS: dict[str, tuple[str, ...]] = {
    "vae": ("torch",),
    "scale": ("dask", "distributed"),
    "db": ("sqlalchemy", "psycopg"),
}


class MissingExtra(UserError):
    """A feature whose optional extra is not installed; the message says how to install it."""


def require(extra: str, what: str) -> None:
    """Raise `MissingExtra` (naming `what`, the extra and the pip line) unless every module of `extra` is
    installed. It only looks them up (`importlib.util.find_spec`): importing torch takes seconds."""
    for module in EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a module blocked in sys.modules, or one without a spec
            found = False
        if not found:
            raise MissingExtra(f"{what} needs the {extra!r} extra: pip install cohortshield[{extra}]")
