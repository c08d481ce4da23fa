"""Small cells closed under derivation (issue #35, finding 4): what leaves under a cell policy admits
no count 1..N-1 by any linear combination a reader forms from everything released together
(tests/cell_attack.py bounds every group by integer programs)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from engine.disclosure.cells import (
    SUPPRESSED,
    SmallCellPolicy,
    phewas_allele_counts,
    suppress_phewas,
    suppress_phewas_tables,
)
from engine.utility import phewas
from tests.cell_attack import Derived, phewas_attack

CMS = SmallCellPolicy.parse("cms")


def _row(snp: str, phecode: str, cases: int, case_minor: int, controls: int = 900, control_minor: int = 300):
    return {
        "snp": snp,
        "phecode": phecode,
        "phenotype": f"phenotype {phecode}",
        "n_cases": cases,
        "n_controls": controls,
        "case_maf": case_minor / (2 * cases),
        "control_maf": control_minor / (2 * controls),
        "odds_ratio": 1.0,
        "p": 0.5,
    }


def _old_publishing(table: pd.DataFrame, policy: SmallCellPolicy) -> pd.DataFrame:
    """The publishing before the fix: a row is withheld only when a count of its own is small."""
    small = phewas_allele_counts(table).apply(lambda s: s.map(policy.is_small)).any(axis=1)
    out = table.astype(object)
    out.loc[small, ["n_cases", "n_controls", "case_maf", "control_maf", "odds_ratio", "p"]] = SUPPRESSED
    return out


@pytest.fixture(scope="module")
def sample_phewas(sample_dataset) -> pd.DataFrame:
    return phewas.phewas_of_records(sample_dataset.group_records("cohort"), sample_dataset.genotypes)


def test_the_attack_finds_a_parent_minus_its_child_on_the_old_publishing(sample_phewas):
    """Finding 1: `phewas --min-cell cms` published 110 and 110.1 of rs1333049, which differ by one
    patient with 0 minor alleles (2 major alleles): the attack pins both."""
    t = sample_phewas[(sample_phewas.snp == "rs1333049") & sample_phewas.phecode.str.startswith("110")]
    found = phewas_attack({"original": _old_publishing(t, CMS)})
    assert Derived("rs1333049", "110 minus 110.1", "patients", 1, 1) in found
    assert Derived("rs1333049", "110 minus 110.1", "major alleles", 2, 2) in found
    assert phewas_attack({"original": suppress_phewas(t, CMS)[0]}) == []


def test_parent_minus_one_child_is_withheld():
    t = pd.DataFrame([_row("s", "110", 31, 12), _row("s", "110.1", 30, 12), _row("s", "120", 25, 11)])
    assert [f.region for f in phewas_attack({"o": _old_publishing(t, CMS)})] == ["110 minus 110.1"] * 2
    out, note = suppress_phewas(t, CMS)
    assert out["p"].tolist() == [SUPPRESSED, 0.5, 0.5]  # the ancestor goes, the specific phenotype stays
    assert note.rows_withheld == 1 and phewas_attack({"o": out}) == []


def test_parent_minus_published_siblings_is_withheld():
    """Finding 2: 250.2 is withheld (5 minor alleles), 250 minus 250.1 and 250.3 leaves it (siblings
    read as disjoint): 60 - 25 - 30 = 5 cases."""
    rows = [_row("s", "250", 60, 30), _row("s", "250.1", 25, 12), _row("s", "250.2", 20, 5)]
    t = pd.DataFrame([*rows, _row("s", "250.3", 30, 13)])
    old = phewas_attack({"o": _old_publishing(t, CMS)})
    assert any(f.region == "250 minus the sum of 250.1, 250.3" for f in old)
    out, _ = suppress_phewas(t, CMS)
    assert phewas_attack({"o": out}) == []
    assert out.loc[0, "p"] == 0.5  # the parent stays; a child goes
    assert (out["p"] == SUPPRESSED).sum() == 2


@pytest.mark.slow
def test_no_derived_small_cell_in_the_sample_phewas(sample_phewas):
    """Findings 1 and 2 on the shipped sample: every group of every SNP's phecode families (1,842 rows)
    is bounded; before the fix `phewas --min-cell cms` gave 242 parent-minus-child groups of 1-10."""
    policy = CMS
    before = phewas_attack({"original": _old_publishing(sample_phewas, policy)}, policy.high + 1)
    pairs = {(f.snp, f.region) for f in before if f.quantity == "patients" and " minus " in f.region}
    assert len(pairs) >= 242
    out, note = suppress_phewas(sample_phewas, policy)
    assert phewas_attack({"original": out}, policy.high + 1) == []
    planted = {"rs2476601": "714.1", "rs17234657": "555.1", "rs3135388": "335"}
    for snp, pc in planted.items():  # the planted associations stay published
        assert out.loc[(out.snp == snp) & (out.phecode == pc), "p"].iloc[0] != SUPPRESSED
    assert note.rows_withheld == int((out["p"] == SUPPRESSED).sum())


def test_original_and_release_published_together():
    """Finding 3: a release's row lies inside the original's (released items count toward a phecode
    only when every code does); 40 - 33 = 7 patients lost, a small cell between the two tables."""
    o = pd.DataFrame([_row("s", "401", 40, 20), _row("s", "402", 50, 20)])
    r = pd.DataFrame([_row("s", "401", 33, 16), _row("s", "402", 50, 20)])
    tables = {"original": o, "released": r}
    old = phewas_attack({k: _old_publishing(v, CMS) for k, v in tables.items()})
    assert Derived("s", "original 401 minus released 401", "patients", 7, 7) in old
    (o2, _), (r2, rnote) = suppress_phewas_tables([o, r], CMS)
    assert o2["p"].tolist() == [0.5, 0.5] and r2["p"].tolist() == [SUPPRESSED, 0.5]
    assert rnote.rows_withheld == 1
    assert phewas_attack({"original": o2, "released": r2}) == []


def test_no_policy_withholds_nothing(sample_phewas):
    out, note = suppress_phewas(sample_phewas, SmallCellPolicy())
    assert note.rows_withheld == 0 and not np.any(out["p"] == SUPPRESSED)


def _counts_from_shares(written: pd.DataFrame, policy: SmallCellPolicy) -> list[tuple[str, int]]:
    """Counts 1..N-1 a reader forms from `labs uniqueness`' written rows: a shown share times its shown
    count gives the unique and the non-unique patients with at least d days; those and their
    differences (patients with d to d' - 1 days) are counts of people."""
    shown = written[(written["patients"] != SUPPRESSED) & (written["share_unique"] != SUPPRESSED)]
    n = shown["patients"].astype(int).to_numpy()
    unique = np.rint(shown["share_unique"].astype(float).to_numpy() * n).astype(int)
    found = []
    for name, col in (("unique", unique), ("not unique", n - unique)):
        for i in range(len(col)):
            found += [(name, int(x)) for x in [col[i], *(col[i] - col[i + 1 :])] if policy.is_small(x)]
    return found


def test_labs_uniqueness_shares_give_no_small_count(tmp_path, capsys):
    """Finding 4: `labs uniqueness --min-cell cms` on the sample wrote shares beside published counts
    from which 6 counts of 1-10 followed (share x patients: 10, 8, 4, 3, 2, 1 non-unique patients with
    at least 10..15 days)."""
    from pathlib import Path

    from engine.commands.cli import main

    labs = Path(__file__).resolve().parents[1] / "sample_data" / "labs.parquet"
    out = tmp_path / "u.csv"
    assert main(["labs", "uniqueness", "--labs", str(labs), "--min-cell", "cms", "--out", str(out)]) == 0
    written = pd.read_csv(out, dtype=str)
    assert _counts_from_shares(written, CMS) == []
    assert "share(s) unique" in capsys.readouterr().out
    shown = written["share_unique"] != SUPPRESSED
    assert (
        shown.sum() > 100
        and (written.loc[written["patients"] == SUPPRESSED, "share_unique"] == SUPPRESSED).all()
    )


def _steps_leaks(steps: list[dict], policy: SmallCellPolicy) -> list[tuple[str, int]]:
    """Counts 1..N-1 in GCCens' steps as a reader forms them: a shown `records` cell, and the difference
    of two shown cells of a code (records at level l are those holding it at least l times)."""
    by_code: dict[str, list[tuple[int, int]]] = {}
    for s in steps:
        if str(s["records"]) != SUPPRESSED:
            by_code.setdefault(str(s["code"]), []).append((int(s["from_count"]), int(s["records"])))
    found = []
    for code, cells in by_code.items():
        v = [r for _, r in sorted(cells)]
        found += [
            (code, x)
            for i in range(len(v))
            for x in [v[i], *(v[i] - np.array(v[i + 1 :]))]
            if policy.is_small(x)
        ]
    return found


def _gccens_report(policy: SmallCellPolicy):
    from dataclasses import replace

    from test_report import KEY, _entry, _toy

    from engine.release import Release
    from engine.report.report import build_report
    from engine.study.runs import GCCensSettings, RunInputs
    from engine.study.study import Study, data_ref

    _, _, pop, cohort = _toy()
    data = data_ref("toy", pop, RunInputs(pop, cohort), sources={"events.csv": "abc"})
    keep = cohort.items[cohort.event_item] == "401.1"
    steps = [{"code": "002.1", "from_count": 1, "records": 1, "below_k_before": 90}]  # finding 5's first step
    steps += [
        {"code": "401.1", "from_count": lv, "records": n, "below_k_before": 80}
        for lv, n in [(3, 40), (2, 43), (1, 70)]
    ]
    steps += [
        {"code": f"{c:03d}.9", "from_count": 1, "records": 50, "below_k_before": 70} for c in range(100, 160)
    ]
    caps = {
        f"{c:03d}.{d}": 1 + c % 7 for c in range(100, 200) for d in range(2)
    }  # each code's sample maximum
    release = Release(
        "GCCens", cohort.keep_events(keep), params={"k": 2, "caps": caps}, loss={"steps": steps}
    )
    entry, inp = _entry("GCCens", release, GCCensSettings(k=2), data, pop)
    study = replace(Study(data, ADV_OF_TOY, 2, pseudonym_key=KEY).add(entry), small_cells=policy)
    return build_report(study, {"GCCens": inp}, pop, cohort, reproducible=True)


ADV_OF_TOY = __import__("test_report").ADV


def test_gccens_appendix_under_the_policy():
    """Finding 5: the bundle's appendix (`appendix/gccens/steps.csv`, `caps.json`) listed the cohort's
    per-code figures down to one record (`002.1,1,1,...`) under no cell policy."""
    import io

    plain = _gccens_report(SmallCellPolicy())
    assert set(plain.appendix) == {"appendix/gccens/steps.csv", "appendix/gccens/caps.json"}
    old = pd.read_csv(io.BytesIO(plain.appendix["appendix/gccens/steps.csv"]), dtype=str)
    assert old.iloc[0].tolist()[:3] == ["002.1", "1", "1"]
    assert _steps_leaks(old.to_dict("records"), CMS)  # what the policy must remove

    rep = _gccens_report(CMS)
    assert "appendix/gccens/caps.json" not in rep.appendix  # per-code maxima of the cohort
    r = rep.data["releases"][0]
    assert isinstance(r["method parameters"]["caps"], str) and "withheld" in r["method parameters"]["caps"]
    steps = pd.read_csv(io.BytesIO(rep.appendix["appendix/gccens/steps.csv"]), dtype=str)
    assert _steps_leaks(steps.to_dict("records"), CMS) == []
    assert steps.iloc[0].tolist()[:3] == ["002.1", SUPPRESSED, SUPPRESSED]
    shown = steps[steps["code"] == "401.1"]["records"].tolist()
    assert shown == ["40", SUPPRESSED, "70"]  # 43 - 40 = 3 patients held 401.1 exactly twice
    notes = rep.data["small cells"]["suppressed"]
    assert notes == [
        {
            "release": "GCCens",
            "table": "GCCens steps",
            "columns": ["records"],
            "primary": 1,
            "complementary": 1,
            "rows withheld": 0,
        }
    ]


def test_gccens_steps_of_the_sample_under_cms(sample_dataset):
    """The shipped sample's GCCens (k = 5 against the population): its 4,058 steps through the report's rule."""
    from engine.anonymize.censor import gccens
    from engine.report.report import cohort_figures_under

    release = gccens(sample_dataset.group_records("cohort"), sample_dataset.group_records("population"), 5)
    assert _steps_leaks(release.loss["steps"], CMS)
    params, loss, note = cohort_figures_under(release.params, release.loss, CMS, "GCCens")
    assert _steps_leaks(loss["steps"], CMS) == [] and params["caps"] != release.params["caps"]
    assert note is not None and note["primary"] > 0 and len(loss["steps"]) == len(release.loss["steps"])


@pytest.fixture(scope="module")
def demo_d_phewas(sample_dataset) -> pd.DataFrame:
    """The PheWAS of the sample cohort's Heatherly DEMO_D release (k = 5 within the cohort)."""
    from engine.anonymize.population import anonymize

    cohort = sample_dataset.group_records("cohort")
    release = anonymize(cohort, cohort.patient_ids, 5, scope="cohort").release
    return phewas.phewas_of_release(release, sample_dataset.genotypes)


def test_original_and_demo_d_tables_published_together(sample_phewas, demo_d_phewas):
    """Finding 3 on the sample: the original and DEMO_D's tables, each under CMS alone, differ in the
    cases of a phecode by 1-10 (the patients the release lost) in hundreds of rows; judged together no
    shown pair of rows differs so, and the attack finds nothing in a slice of every family kind (the
    whole two-table attack takes minutes: 1,842 + 1,772 rows)."""
    cms_alone = [suppress_phewas(t, CMS)[0] for t in (sample_phewas, demo_d_phewas)]

    def small_differences(o: pd.DataFrame, r: pd.DataFrame) -> int:
        both = o.merge(r, on=["snp", "phecode"], suffixes=("", "_r"))
        shown = (both["n_cases"] != SUPPRESSED) & (both["n_cases_r"] != SUPPRESSED)
        d = (both.loc[shown, "n_cases"].astype(int) - both.loc[shown, "n_cases_r"].astype(int)).abs()
        return int(d.between(1, 10).sum())

    assert small_differences(*cms_alone) > 200
    (o, _), (r, note) = suppress_phewas_tables([sample_phewas, demo_d_phewas], CMS)
    assert small_differences(o, r) == 0 and note.rows_withheld > 0
    assert o.equals(suppress_phewas(sample_phewas, CMS)[0])  # the original is judged as alone

    def part(t: pd.DataFrame) -> pd.DataFrame:
        return t[(t.snp == "rs3135388") & t.phecode.str.startswith("3")]

    before = phewas_attack({"original": part(cms_alone[0]), "released": part(cms_alone[1])})
    assert any(f.region.startswith("original ") and " minus released " in f.region for f in before)
    assert phewas_attack({"original": part(o), "released": part(r)}) == []


def test_cli_phewas_released_beside_the_original(tmp_path, capsys):
    """Finding 3 in `phewas --released --min-cell cms`: a release that drops the coronary code of 5
    patients wrote the original's and the release's cases of phecode 411.4 side by side (5 apart)."""
    from test_phewas_cli import _files

    from engine.commands.cli import main

    ev = _files(tmp_path)
    lost = ev.index[ev["code"] == "414.01"][:5]
    ev.drop(index=lost).to_csv(tmp_path / "released.csv", index=False)
    codes = sorted(set(ev["code"]))
    pd.DataFrame({"released_item": codes, "original_code": codes}).to_csv(
        tmp_path / "codemap.csv", index=False
    )
    out = tmp_path / "out.csv"
    args = ["phewas", "--events", str(tmp_path / "events.csv"), "--genotypes", str(tmp_path / "geno.csv")]
    args += ["--released", str(tmp_path / "released.csv"), "--codemap", str(tmp_path / "codemap.csv")]
    assert main([*args, "--min-cell", "cms", "--out", str(out)]) == 0
    written = pd.read_csv(out, dtype=str).set_index("phecode")
    assert "released row(s) withheld" in capsys.readouterr().out
    for pc in ("411", "411.4"):  # the original is shown, the release's row 5 cases apart is not
        assert written.loc[pc, "n_cases"] != SUPPRESSED and written.loc[pc, "n_cases_released"] == SUPPRESSED
    shown = written[
        (written["n_cases"] != SUPPRESSED) & (written["n_cases_released"].fillna(SUPPRESSED) != SUPPRESSED)
    ]
    d = (shown["n_cases"].astype(int) - shown["n_cases_released"].astype(int)).abs()
    assert not d.between(1, 10).any()


def test_app_pairs_download_judges_original_and_release_together(sample_phewas, demo_d_phewas):
    """Finding 3 in the app: the PheWAS page's "QQ-plot and change data" download (phewas_pairs.csv,
    `phewas.paired` of every release) suppressed its case counts cell by cell, so the original's and
    DEMO_D's cases of a phecode were written side by side 1-10 apart."""
    from ui.downloads import small_cells_of

    pairs = phewas.paired(sample_phewas, demo_d_phewas).assign(release="DEMO_D")
    derived = [c for c in pairs.columns if c.startswith(("odds_ratio", "p_", "neglog10")) or c == "change"]
    out, caption = small_cells_of(pairs, ("n_cases_original", "n_cases_released"), derived, policy=CMS)
    shown = (out["n_cases_original"] != SUPPRESSED) & (out["n_cases_released"] != SUPPRESSED)
    both = out[shown & pairs["n_cases_original"].notna() & pairs["n_cases_released"].notna()]
    d = (both["n_cases_original"].astype(float) - both["n_cases_released"].astype(float)).abs()
    assert len(both) > 100 and not d.between(1, 10).any()
    withheld = out["n_cases_released"] == SUPPRESSED
    assert (out.loc[withheld, ["p_released", "odds_ratio_released", "change"]] == SUPPRESSED).all().all()
    kept = (out["n_cases_original"] != SUPPRESSED) & withheld
    assert kept.any() and (out.loc[kept, "p_original"] != SUPPRESSED).all()  # the original's side stays
    assert "withheld" in caption
