"""The size of a plain install of the core against the full one (issue 38, finding 5).

Resolves pyproject.toml's requirements (the core's `dependencies`, then with each extra of
`[project.optional-dependencies]` and with `all`) through the metadata of the packages installed in this
interpreter's environment (`make setup`'s .venv: requirements.txt, every extra), recursively with their
markers and extras, and adds up the bytes of each distribution's installed files (its RECORD). No download,
no venv: a second or two. `--pip` also asks pip what a fresh install of the core from this checkout
would install (`pip install --dry-run --ignore-installed --report`, from the indexes pip is configured
with), and checks that torch, dask and sqlalchemy are not among it.

    .venv/bin/python bench/install_size.py [--pip] [--top 8]

Measured 2026-11-29 on this machine (the .venv of requirements-dev.txt; sizes as installed, MB = 10^6 B;
1 s; with --pip 69 s):
    core            62 packages  1,080 MB  (llvmlite 180 MB, pyarrow 176 MB, scipy 143 MB, pandas 81 MB, ...)
    core + vae      69 packages  1,943 MB  (+7: torch 757 MB, sympy 75 MB, networkx 17 MB, ...)
    core + scale    78 packages  1,117 MB  (+16: dask 16 MB, distributed 7 MB, tornado 5 MB, ...)
    core + db       65 packages  1,121 MB  (+3: sqlalchemy 28 MB, psycopg-binary 11 MB, psycopg 2 MB)
    core + all      87 packages  2,020 MB  (what make run installs, less the few pins nothing requires)
    pip install . (core, fresh): 63 packages (the core's 62 and cohortshield); no torch, dask or sqlalchemy
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from importlib.metadata import Distribution, PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
HEAVY = ("torch", "dask", "distributed", "sqlalchemy", "psycopg")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(extras: tuple[str, ...]) -> list[Requirement]:
    """The core's requirements and those of `extras` (`cohortshield[...]` inside an extra expanded)."""
    out = [Requirement(r) for r in PROJECT["dependencies"]]
    todo = list(extras)
    while todo:
        for text in PROJECT["optional-dependencies"][todo.pop()]:
            req = Requirement(text)
            if canonical(req.name) == canonical(PROJECT["name"]):
                todo.extend(req.extras)
            else:
                out.append(req)
    return out


def closure(reqs: list[Requirement]) -> dict[str, Distribution]:
    """Every installed distribution the requirements pull, by canonical name (markers evaluated here)."""
    found: dict[str, Distribution] = {}
    seen: set[tuple[str, str]] = set()
    todo = [(req, "") for req in reqs]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonical(req.name)
        try:
            dist = found.get(name) or distribution(req.name)
        except PackageNotFoundError:
            sys.exit(f"{req.name} is not installed here: run this with make setup's .venv/bin/python")
        found[name] = dist
        for wanted in ("", *sorted(req.extras)):
            if (name, wanted) in seen:
                continue
            seen.add((name, wanted))
            todo.extend((Requirement(r), wanted) for r in dist.requires or [])
    return found


def size(dist: Distribution) -> int:
    """Bytes of the distribution's installed files (its RECORD; a file's own size where RECORD has none)."""
    total = 0
    for f in dist.files or []:
        if f.size is not None:
            total += f.size
        else:
            path = Path(str(dist.locate_file(f)))
            total += path.stat().st_size if path.is_file() else 0
    return total


def mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB"


def pip_report() -> list[str]:
    """What `pip install .` (the core, nothing installed yet) would install, as pip resolves it."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-qq"]
        subprocess.run([*pip, "--report", str(report), str(ROOT)], check=True)
        items = json.loads(report.read_text())["install"]
    return sorted(canonical(i["metadata"]["name"]) for i in items)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--pip", action="store_true", help="also resolve a fresh install of the core with pip")
    ap.add_argument("--top", type=int, default=8, help="the largest packages each extra adds")
    args = ap.parse_args()
    core = closure(requirements(()))
    core_size = sum(size(d) for d in core.values())
    sizes = sorted(((n, size(d)) for n, d in core.items()), key=lambda x: -x[1])
    largest = ", ".join(f"{n} {mb(s)}" for n, s in sizes[: args.top])
    print(f"{'core':<28} {len(core):>3} packages {mb(core_size):>10}  ({largest})")
    for extra in [e for e in PROJECT["optional-dependencies"] if e not in ("dev", "all")] + ["all"]:
        full = closure(requirements((extra,)))
        added = {n: size(d) for n, d in full.items() if n not in core}
        largest = ", ".join(f"{n} {mb(s)}" for n, s in sorted(added.items(), key=lambda x: -x[1])[: args.top])
        print(
            f"{'core + ' + extra:<28} {len(full):>3} packages {mb(core_size + sum(added.values())):>10}"
            f"  (+{len(added)}: {largest})"
        )
    heavy = [n for n in HEAVY if n in core]
    print(f"heavy packages in the core: {heavy or 'none'}")
    if args.pip:
        names = pip_report()
        leaked = [n for n in HEAVY if n in names]
        print(f"pip install . (core, fresh): {len(names)} packages; heavy among them: {leaked or 'none'}")
        heavy += leaked
    return 1 if heavy else 0


if __name__ == "__main__":
    sys.exit(main())
