"""One path to a release on the command line (issue 38, finding 2): `anonymize METHOD` and `study add
... METHOD` both turn their options into the method's settings with its `settings_of` and make the
release with `engine.study.study.make_release`; for the same settings and key they give byte-identical
release files. Before, the four `anonymize_*` commands ran, verified and published on their own."""

from __future__ import annotations

import hashlib
from collections import Counter
from itertools import combinations
from pathlib import Path

import pandas as pd
import pytest

import engine.study.study as study_module
from engine.commands.cli import main
from engine.study.study import Study

CODES = ["401.1", "250.00", "272.4", "427.31", "428.0", "414.01", "496", "585.9", "244.9", "530.81"]
PAIRS = list(combinations(CODES, 2))[:39]  # 39 pairs of twins: k = 2 holds

# method -> (its options, the study's attacker that is the method's own adversary for them)
METHODS = {
    "gccens": (["--codes", "paper", "--scope", "cohort"], ("cohort", "all_visits")),
    "generalize": (["--constraints", "none", "--complete", "--scope", "cohort"], ("cohort", "single_visit")),
    "ugaclip": (["--knowledge", "single_visit"], ("cohort", "single_visit")),
    "lda": (["--codes", "all", "--icd-levels", "phecode"], ("cohort", "all_visits")),
}


@pytest.fixture
def data(tmp_path: Path) -> tuple[Path, Path]:
    rows = []
    for j, (a, b) in enumerate(PAIRS):
        for twin in (1, 2):
            pid = f"P{j:02d}{twin}"
            rows += [(pid, 1, a, 40 + j % 7), (pid, 2, b, 41 + j % 7)]
    ev, co = tmp_path / "events.csv", tmp_path / "cohort.csv"
    pd.DataFrame(rows, columns=["patient_id", "visit", "code", "age"]).to_csv(ev, index=False)
    pd.DataFrame({"patient_id": sorted({r[0] for r in rows})}).to_csv(co, index=False)
    return ev, co


@pytest.fixture
def made(monkeypatch) -> list:
    """Every `make_release` call: (settings, adversary, k)."""
    calls: list = []
    real = study_module.make_release

    def spy(name, settings, inputs, data, adversary, k, **kw):
        calls.append((settings, adversary, k))
        return real(name, settings, inputs, data, adversary, k, **kw)

    monkeypatch.setattr(study_module, "make_release", spy)
    return calls


@pytest.mark.parametrize("method", list(METHODS))
def test_anonymize_and_study_add_make_one_release_through_make_release(
    method, data, made, tmp_path, capsys
) -> None:
    options, (scope, knowledge) = METHODS[method]
    ev, co = data
    study = tmp_path / "study.json"
    new = ["study", "new", str(study), "--events", str(ev), "--cohort", str(co)]
    assert main([*new, "--scope", scope, "--knowledge", knowledge, "--k", "2"]) == 0
    add = ["study", "add", str(study), "--name", method, method, "--events", str(ev), "--cohort", str(co)]
    assert main([*add, *options]) == 0, capsys.readouterr().err
    s = Study.from_json(study.read_text())
    key = tmp_path / "key"
    key.write_text(s.pseudonym_key + "\n")
    out, codemap = tmp_path / "release.csv", tmp_path / "code_map.csv"
    args = ["anonymize", method, "--events", str(ev), "--cohort", str(co), "--k", "2", *options]
    assert main([*args, "--out", str(out), "--codemap", str(codemap), "--key-file", str(key)]) == 0, (
        capsys.readouterr().err
    )
    assert len(made) == 2, "anonymize METHOD did not go through make_release"
    (added, adv_added, k_added), (anonymized, adv_anon, k_anon) = made
    assert added == anonymized == s.get(method).settings
    assert (adv_anon, k_anon) == (adv_added, k_added) == (s.adversary, 2)
    recorded = dict(s.get(method).files)
    written = {
        "release.csv": hashlib.sha256(out.read_bytes()).hexdigest(),
        "code_map.csv": hashlib.sha256(codemap.read_bytes()).hexdigest(),
    }
    assert written == recorded


@pytest.fixture
def work(monkeypatch) -> dict[str, Counter]:
    """What one run does twice if it repeats itself: the release files built by the export gate
    (`engine.io.export.release_files`, by file set) and the arbiter's verifications
    (`engine.risk.release_distinguishability`, by adversary)."""
    import engine.io.export as export_module
    import engine.risk as risk_module

    counts: dict[str, Counter] = {"files": Counter(), "verified": Counter()}
    real_files, real_dis = export_module.release_files, risk_module.release_distinguishability

    def files(release, *args, **kw):
        counts["files"][release.fingerprint] += 1
        return real_files(release, *args, **kw)

    def dis(release, adversary, population=None):
        counts["verified"][adversary.label] += 1
        return real_dis(release, adversary, population)

    monkeypatch.setattr(export_module, "release_files", files)
    monkeypatch.setattr(risk_module, "release_distinguishability", dis)
    return counts


@pytest.mark.parametrize("method", [*METHODS, "aclip"])
def test_anonymize_builds_the_files_once_and_verifies_once_per_adversary(
    method, data, work, tmp_path
) -> None:
    """`anonymize generalize` and `anonymize ugaclip` verified their release twice (the method's own
    verification, then `make_release`'s) and every command built its release files twice (in
    `make_release`, then again in `publish`): one build, one verification under the one adversary."""
    options = METHODS.get(method, (["--knowledge", "all_visits"], None))[0]
    ev, co = data
    out, codemap = tmp_path / "release.csv", tmp_path / "code_map.csv"
    args = ["anonymize", method, "--events", str(ev), "--cohort", str(co), "--k", "2", *options]
    assert main([*args, "--out", str(out), "--codemap", str(codemap)]) == 0
    assert out.is_file()
    built, verified = dict(work["files"]), dict(work["verified"])
    assert (list(built.values()), list(verified.values())) == ([1], [1]), (built, verified)


@pytest.mark.parametrize("method", ["generalize", "ugaclip"])
def test_study_add_verifies_once(method, data, work, tmp_path) -> None:
    """`study add` runs the method through `settings.run` (`make_release`): Heatherly's and PPE+CLIP's
    own verification came on top of `make_release`'s, twice under the study's adversary."""
    options, (scope, knowledge) = METHODS[method]
    ev, co = data
    study = tmp_path / "study.json"
    new = ["study", "new", str(study), "--events", str(ev), "--cohort", str(co)]
    assert main([*new, "--scope", scope, "--knowledge", knowledge, "--k", "2"]) == 0
    work["verified"].clear()
    add = ["study", "add", str(study), "--name", method, method, "--events", str(ev), "--cohort", str(co)]
    assert main([*add, *options]) == 0
    assert dict(work["verified"]) == {f"{scope} / {knowledge.replace('_', ' ')}": 1}
