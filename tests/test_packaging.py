"""The distribution installs what it needs and no more (issue 38, finding 5).

Every third-party module the code imports is declared in pyproject.toml; torch, Dask and the database
drivers are optional extras (`vae`, `scale`, `db`, `all`: engine/io/extras.py) and the core runs without
them, refusing a feature that needs a missing extra by name (exit 2), never with a traceback; the lock
(requirements.txt, requirements-dev.txt) pins every installed package.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib.metadata import distribution, packages_distributions
from pathlib import Path

import pytest
from test_architecture import top_level_imports

from engine.io.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    return canonical(re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0])


def declared(*groups: str) -> set[str]:
    """The distributions of the core (no group) or of the named optional groups."""
    reqs = PROJECT["dependencies"] if not groups else []
    for group in groups:
        reqs = [*reqs, *PROJECT["optional-dependencies"][group]]
    names = {requirement_name(r) for r in reqs if not r.startswith("cohortshield")}
    for r in reqs:  # `cohortshield[vae,scale]` inside `all`
        if r.startswith("cohortshield["):
            names |= declared(*r[len("cohortshield[") : r.index("]")].split(","))
    return names


def test_every_imported_distribution_is_declared() -> None:
    """Finding 5: sqlalchemy (and cryptography, starlette) were imported but not declared."""
    dists = packages_distributions()
    everything = declared() | declared("vae", "scale", "db")
    missing = {}
    for module, path in top_level_imports().items():
        if module in sys.stdlib_module_names or module in ("engine", "ui", "pages", "tests"):
            continue
        assert module in dists, f"{module} (imported by {path.relative_to(ROOT)}) is not installed"
        if not {canonical(d) for d in dists[module]} & everything:
            missing[module] = str(path.relative_to(ROOT))
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_the_heavy_parts_are_extras_and_the_core_is_without_them() -> None:
    extras = PROJECT["optional-dependencies"]
    assert declared("vae") == {"torch"}
    assert declared("scale") == {"dask", "distributed"}
    assert declared("db") == {"sqlalchemy", "psycopg"}
    assert declared("all") == declared("vae", "scale", "db")
    assert not declared() & declared("all"), "the core declares a heavy part"
    assert "dev" in extras
    dists = packages_distributions()
    for extra, modules in EXTRAS.items():  # engine/io/extras.py's modules are the extra's distributions
        assert {canonical(d) for m in modules for d in dists[m]} == declared(extra)


def test_the_cli_is_a_console_script() -> None:
    assert PROJECT["scripts"] == {"cohortshield": "engine.commands.cli:main"}


# Makes the named top-level modules (and their submodules) uninstalled for this interpreter. Not
# `sys.modules[name] = None`: scipy's array-API layer takes a name in sys.modules for an imported torch.
BLOCKER = """
import importlib.abc, sys
class Uninstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Uninstalled())
"""


def run_without(blocked: tuple[str, ...], argv: list[str]) -> subprocess.CompletedProcess[str]:
    """`python -m engine ARGV` in a fresh interpreter where the modules `blocked` are not installed (an
    extra left out), which also checks that none of them was imported."""
    code = (
        f"BLOCKED = {blocked!r}\n{BLOCKER}\nfrom engine.commands.cli import main\nsys.exit(main({argv!r}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )


def risk_argv(tmp_path: Path) -> list[str]:
    out = tmp_path / "risk.csv"
    return ["risk", "--events", str(DATA / "events_good.csv"), "--cohort", str(DATA / "cohort_good.csv"),
            "--scope", "population", "--knowledge", "all_visits", "--k", "2", "--out", str(out)]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_the_core_cli_runs_without_an_extra(extra: str, tmp_path: Path) -> None:
    done = run_without(EXTRAS[extra], risk_argv(tmp_path))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "risk.csv").stat().st_size > 0


def refused(done: subprocess.CompletedProcess[str], what: str, extra: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    assert f"{what} needs the '{extra}' extra: pip install cohortshield[{extra}]" in done.stderr


@pytest.mark.slow
def test_labs_latent_without_torch_is_refused_by_name(tmp_path: Path) -> None:
    argv = [
        "labs",
        "recall",
        "--labs",
        str(DATA / "labs_good.csv"),
        "--latent",
        "2",
        "--out",
        str(tmp_path / "r.csv"),
    ]
    refused(run_without(EXTRAS["vae"], argv), "the VAE", "vae")


@pytest.mark.slow
def test_a_dask_run_without_dask_is_refused_by_name(tmp_path: Path) -> None:
    from engine.commands.cli import main

    assert main(["shards", str(DATA / "events_good.csv"), str(tmp_path / "shards"), "2"]) == 0
    argv = [*risk_argv(tmp_path), "--shards", str(tmp_path / "shards"), "--dask-workers", "1"]
    refused(run_without(EXTRAS["scale"], argv), "a Dask run (--scheduler, --dask-workers)", "scale")


@pytest.mark.slow
def test_a_database_url_without_the_drivers_is_refused_by_name(tmp_path: Path) -> None:
    argv = [*risk_argv(tmp_path)]
    argv[2] = f"sqlite:///{tmp_path / 'omop.db'}"
    refused(run_without(EXTRAS["db"], [*argv, "--source", "omop"]), "a database URL", "db")


def locked(path: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of every requirement of a requirements file (and of its `-r` includes)."""
    found: dict[str, tuple[str, list[str]]] = {}
    text = re.sub(r"\\\n", " ", path.read_text())
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            found |= locked(path.parent / line[3:].strip())
        elif line:
            requirement, *options = line.split()
            assert "==" in requirement, f"{path.name}: {requirement} is not pinned"
            name, version = requirement.split("==", 1)
            found[requirement_name(name)] = (version, [o for o in options if o.startswith("--hash=sha256:")])
    return found


@pytest.mark.parametrize("lock", ["requirements.txt", "requirements-dev.txt"])
def test_the_lock_pins_every_package_it_installs_with_its_hash(lock: str) -> None:
    """Finding 5: requirements.txt pinned 41 of 114 installed packages (fonttools and pillow, on which the
    byte-identical PDF depends, floated). The lock is closed: every package a pinned one requires (its
    installed metadata, markers and extras evaluated here) is pinned, at the installed version, with a hash."""
    from packaging.requirements import Requirement

    pins = locked(ROOT / lock)
    assert {n for n, (_, hashes) in pins.items() if not hashes} == set()
    unpinned: dict[str, str] = {}
    todo = [(name, "") for name in pins]
    if lock == "requirements.txt":
        todo += [(requirement_name(r), "") for r in PROJECT["dependencies"]]
        todo += [(name, "") for name in declared("all")]
    seen = set()
    while todo:
        name, extra = todo.pop()
        if (name, extra) in seen:
            continue
        seen.add((name, extra))
        if name not in pins:
            unpinned.setdefault(name, "pyproject.toml")
            continue
        dist = distribution(name)
        assert dist.version.split("+")[0] == pins[name][0], (
            f"{name}: {dist.version} installed, {pins[name][0]} pinned"
        )
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": extra}):
                todo += [(requirement_name(req.name), e) for e in ("", *req.extras)]
                if requirement_name(req.name) not in pins:
                    unpinned.setdefault(requirement_name(req.name), name)
    assert unpinned == {}, f"required but not pinned in the lock (required by): {unpinned}"


@pytest.mark.slow
def test_the_lab_orders_page_training_without_torch_is_refused_by_name() -> None:
    """The app's Train button calls `LabRecallSettings.train` (ui/views/labs.py), whose UserError the page
    shows as its text (ui/errors.py): the same message as the CLI's, not an ImportError's traceback."""
    code = (
        f"BLOCKED = ('torch',)\n{BLOCKER}\n"
        "from engine.io.extras import MissingExtra\n"
        "from engine.labs.vae_config import VAEConfig\n"
        "from engine.study.runs import LabRecallSettings\n"
        "try:\n"
        "    LabRecallSettings(vae=VAEConfig(latent_dim=2)).train(None)\n"
        "except MissingExtra as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "the VAE needs the 'vae' extra: pip install cohortshield[vae]\n"
