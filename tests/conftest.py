"""Shared fixtures (the fixture-file directory, the shipped sample dataset loaded once, each session's
own audit log, store and data roots) and the test tiers of issue 38: the `app` and `slow` marks and the
Hypothesis profiles ("ci" for `make test`, "fast" for `make test-fast`)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import settings

from engine.dataset import Dataset
from engine.io.loaders import SAMPLE_DIR, SAMPLE_FILES
from engine.records import Records

# Property tests are deterministic by default (CI and `make test`): the same examples every run, no
# example database. HYPOTHESIS_PROFILE=explore searches randomly with more examples; a counterexample
# it finds is kept in the test as an explicit @example. No deadline: a time on a shared machine is no
# test result (a 200 ms deadline failed test_report under load).
# The fast tier (`make test-fast`: a mark expression that leaves out `slow`) runs the property tests under
# "fast": derandomized as "ci", but at most FAST_EXAMPLES examples each, a test's own max_examples capped
# (`cap_examples`); its @example counterexamples all run. `make test` runs every test's full max_examples.
# Each profile's parent is named: a module that imports this file again (`tests.conftest`) registers the
# same profiles, whichever is loaded.
FAST_EXAMPLES = 10
settings.register_profile(
    "ci",
    parent=settings.get_profile("default"),
    derandomize=True,
    database=None,
    print_blob=True,
    deadline=None,
)
settings.register_profile(
    "explore", parent=settings.get_profile("default"), max_examples=500, derandomize=False
)
settings.register_profile("fast", parent=settings.get_profile("ci"), max_examples=FAST_EXAMPLES)
DETERMINISTIC_PROFILES = ("ci", "fast")


def leaves_out_slow(markexpr: str) -> bool:
    """Whether the `-m` expression deselects a test marked only `slow` (the fast tier)."""
    if not markexpr:
        return False
    from _pytest.mark.expression import Expression

    return not Expression.compile(markexpr).evaluate(lambda name, **_: name == "slow")


def profile_for(markexpr: str) -> str:
    """HYPOTHESIS_PROFILE, else "fast" for the fast tier, else "ci"."""
    return os.environ.get("HYPOTHESIS_PROFILE") or ("fast" if leaves_out_slow(markexpr) else "ci")


def pytest_configure(config: pytest.Config) -> None:
    """Load the session's Hypothesis profile (`profile_for`), once, before any test module is imported;
    not when this file is imported, which a test module may do again."""
    settings.load_profile(profile_for(config.option.markexpr))


def cap_examples(items: list[pytest.Item], most: int) -> None:
    """Property tests run at most `most` examples (their own settings otherwise kept: derandomized, no
    database, their phases); Hypothesis reads a test's settings when the test runs."""
    for item in items:
        function = getattr(item, "function", None)
        own = getattr(function, "_hypothesis_internal_use_settings", None)
        if own is not None and own.max_examples > most:
            function._hypothesis_internal_use_settings = settings(own, max_examples=most)


def undeterministic_property_tests(items: list[pytest.Item]) -> list[str]:
    """The collected property tests whose settings search randomly or keep an example database: a test's
    own `@settings(...)` or `settings(parent=...)` can override the profile."""
    found = []
    for item in items:
        function = getattr(item, "function", None)
        own = getattr(function, "_hypothesis_internal_use_settings", None)
        if own is not None and (not own.derandomize or own.database is not None):
            found.append(item.nodeid)
    return found


# A test module that uses any of these runs the app (AppTest, a served app, a browser, an OIDC provider):
# its tests are marked `app` and left out of `make test-fast` (issue 38, finding 6).
APP_SUPPORT = (
    "streamlit.testing",
    *(
        f"{package}{support}"
        for package in ("", "tests.")
        for support in ("apptest_support", "browser_support", "oidc_support")
    ),
)


def runs_the_app(module: object) -> bool:
    """Whether a test module imports one of APP_SUPPORT (a module, or a name taken from one)."""
    for value in vars(module).values():
        name = (
            getattr(value, "__name__", "")
            if isinstance(value, type(os))
            else getattr(value, "__module__", "")
        )
        if isinstance(name, str) and name.startswith(APP_SUPPORT):
            return True
    return False


# The tests left out of the fast tier (issue 38): `make test` runs them. Each its reason; the fast tier
# keeps the engine's unit tests, the papers' worked examples and a property test of each guarantee.
ON_THE_SAMPLE = (
    "a kernel against its reference (or its former self) on the whole shipped sample; the fast tier keeps "
    "the same comparison on random small data"
)
SAMPLE_RUN = (
    "a method, study or report run end to end on the whole shipped sample; the fast tier keeps the method's "
    "unit tests, its worked examples and its property test on small data"
)
SUBPROCESS = "starts the CLI or Python in a subprocess (and kills it, or imports the app there)"
AT_SCALE = (
    "the sharded, Dask, threaded or forked (fan-out) run against the in-process one, on the sample or "
    "many shards"
)
REGENERATES = "regenerates the shipped sample (or a variant of it) and compares it with the shipped files"
IN_DATABASE = "counts in a database against the in-memory count, a database built per example or per worker"
SLOW_MODULES: dict[str, str] = {
    "test_scale_labs_phewas.py": AT_SCALE,
    "test_scale_shards.py": AT_SCALE,
    "test_scale_dask.py": AT_SCALE + " (a local Dask cluster)",
    "test_cdm_study_every_method.py": SAMPLE_RUN,
    "test_report_build_costs.py": SAMPLE_RUN,
    "test_omop_counts_pg.py": IN_DATABASE + " (a PostgreSQL server); test_omop_indb keeps them in DuckDB",
    "test_explain_cdm.py": (
        "generates a SNOMED CDM with its vocabulary tables once per worker for explain along its "
        "poly-hierarchy; test_explain keeps explain's property (a fix brings the record to k) on ICD codes"
    ),
    "test_recipient_dataset.py": (
        "end-to-end CLI runs (anonymize, study report, phewas --dataset) writing and reading recipients' "
        "datasets on the sample"
    ),
}
SLOW_TESTS: dict[str, str] = {
    "test_anonymize_one_path.py::test_anonymize_and_study_add_make_one_release_through_make_release": (
        SAMPLE_RUN
    ),
    "test_audit.py::test_cli_writes_append_entries_with_the_os_user": SUBPROCESS,
    "test_bombs_expanded.py::test_a_duplicate_among_66000_members_is_found_in_linear_time": (
        "times a linear-time check on 66,000 members"
    ),
    "test_cells_derivation.py::test_the_attack_finds_a_parent_minus_its_child_on_the_old_publishing": (
        SAMPLE_RUN
    ),
    "test_cells_derivation.py::test_no_derived_small_cell_in_the_sample_phewas": SAMPLE_RUN,
    "test_cells_derivation.py::test_no_policy_withholds_nothing": SAMPLE_RUN,
    "test_cells_derivation.py::test_labs_uniqueness_shares_give_no_small_count": SAMPLE_RUN,
    "test_cells_derivation.py::test_gccens_steps_of_the_sample_under_cms": SAMPLE_RUN,
    "test_cells_derivation.py::test_original_and_demo_d_tables_published_together": SAMPLE_RUN,
    "test_cells_derivation.py::test_app_pairs_download_judges_original_and_release_together": SAMPLE_RUN,
    "test_censor.py::test_all_codes_on_the_sample_are_unchanged_by_the_speed_ups": ON_THE_SAMPLE,
    "test_censor_fast.py::test_sample_equals_reference": ON_THE_SAMPLE,
    "test_censor_fast.py::test_sample_population_bitset_budget_equals_reference": ON_THE_SAMPLE,
    "test_censor_fast.py::test_sample_cohort_without_bitsets_equals_reference": ON_THE_SAMPLE,
    "test_censor_fast.py::test_sample_targeted_equals_reference": ON_THE_SAMPLE,
    "test_censor_fast.py::test_sample_release_bytes_equal_reference": ON_THE_SAMPLE,
    "test_censor_fast.py::test_sample_resumed_every_step_equals_one_run": ON_THE_SAMPLE,
    "test_cli_lows.py::test_a_killed_report_is_an_incomplete_set_not_a_mixed_one": SUBPROCESS,
    "test_cli_lows.py::test_a_killed_study_write_leaves_no_key_behind": SUBPROCESS,
    "test_cli_paths.py::test_a_killed_run_leaves_no_temporary_after_the_next_run": SUBPROCESS,
    "test_defaults_verify.py::test_study_add_lda_with_its_default_works_on_the_sample": SAMPLE_RUN,
    "test_defaults_verify.py::test_the_lda_on_all_codes_runs_and_verifies_on_the_sample": SAMPLE_RUN,
    "test_explain.py::test_the_sample_fixes_reach_k_once_applied_to_every_record": SAMPLE_RUN,
    "test_gccens_measures_reference.py::test_the_samples_releases_statistics_equal_the_reference": (
        ON_THE_SAMPLE
    ),
    "test_heap_settle.py::test_the_app_run_freezes_its_heap": SUBPROCESS,
    "test_joint_verdict.py::test_study_report_refuses_the_bundle_of_releases_that_fail_together": SAMPLE_RUN,
    "test_known_visits_equal.py::test_the_sample_releases": ON_THE_SAMPLE,
    "test_labs_first_open.py::test_a_sample_variant_reads_its_lab_orders_when_first_asked_for": SAMPLE_RUN,
    "test_labs_read_fast.py::test_sample_labs_equal_reference": ON_THE_SAMPLE,
    "test_labs_read_fast.py::test_sample_lab_codes_by_value_put_the_sample_in_key_order": ON_THE_SAMPLE,
    "test_ledger_fast.py::test_the_sample_report_ledger_equals_the_reference": ON_THE_SAMPLE,
    "test_loaders.py::test_the_sample_defers_its_lab_orders": SUBPROCESS,
    "test_omop_indb.py::test_the_database_count_equals_the_in_memory_count_on_random_cdms": IN_DATABASE,
    "test_omop_indb.py::test_visits_through_visit_occurrence_are_the_in_memory_visits": IN_DATABASE,
    "test_pickled_results.py::test_scopes_fanned_out_give_the_comparison_made_here": AT_SCALE,
    "test_pickled_results.py::test_while_waiting_gets_the_cohorts_result_here_while_the_others_are_made": (
        AT_SCALE
    ),
    "test_policy_fast.py::test_sample_protection_same_as_reference": ON_THE_SAMPLE,
    "test_population_fast.py::test_sample_equals_reference": ON_THE_SAMPLE,
    "test_population_fast.py::test_generated_population_equals_reference": (
        "the completion kernel against its reference on a generated population of 1,500 records at 18 "
        "settings; test_completion_pass_equals_reference keeps the comparison on random small data"
    ),
    "test_reident_reference.py::test_the_samples_patient_days_and_raw_recall_equal_the_reference": (
        ON_THE_SAMPLE
    ),
    "test_release_check.py::test_the_sample_releases_and_broken_ones": SAMPLE_RUN,
    "test_sample_formats.py::test_shipped_meds_and_omop_load_and_hold_the_mixed_sample": REGENERATES,
    "test_risk_trie.py::test_capped_counts_on_the_sample_equal_full_counts_capped": ON_THE_SAMPLE,
    "test_risk_trie.py::test_full_counts_on_the_sample_equal_the_other_kernels": ON_THE_SAMPLE,
    "test_scale_threads.py::test_results_identical_for_1_2_3_threads": AT_SCALE,
    "test_synth.py::test_shipped_sample_is_the_documented_command": REGENERATES,
    "test_synth_icd10.py::test_shipped_variants_match_the_sample_and_load": REGENERATES,
    "test_trajectories.py::test_sample_releases_equal_the_former_kernel": ON_THE_SAMPLE,
    "test_trajectories.py::test_sample_cluster_table_equals_the_former_one": ON_THE_SAMPLE,
}


def slow_key(nodeid: str) -> tuple[str, str]:
    """A test's file name and its function's name, without the folder and the parameters."""
    path, _, name = nodeid.split("[")[0].partition("::")
    return path.rpartition("/")[2], f"{path.rpartition('/')[2]}::{name}"


# fixture -> why every test that uses it is slow
SLOW_FIXTURES: dict[str, str] = {
    "postgres_url": "starts a throwaway PostgreSQL server per worker (initdb, a server: tests/pg_support.py)",
    "sample_dataset": (
        "loads the whole shipped sample (30,000 patients, its lab orders and genotypes) and works on it; "
        "the fast tier keeps the same code on small and random data"
    ),
    "sample_cohort": "the whole shipped sample's cohort (see sample_dataset)",
}


def mark_slow_tests(items: list[pytest.Item]) -> None:
    """Mark `slow` every test of SLOW_MODULES and SLOW_TESTS, and every test that uses one of
    SLOW_FIXTURES."""
    for item in items:
        module, test = slow_key(item.nodeid)
        uses = set(getattr(item, "fixturenames", ())) & set(SLOW_FIXTURES)
        if module in SLOW_MODULES or test in SLOW_TESTS or uses:
            item.add_marker(pytest.mark.slow)


def imports_the_app(name: str) -> bool:
    """Whether a name a test function imports itself is one of APP_SUPPORT, or a test module (already
    collected) that runs the app, e.g. `from test_page_risk import _risk_page`."""
    if name.startswith(APP_SUPPORT):
        return True
    module = sys.modules.get(name)
    return name.rpartition(".")[2].startswith("test_") and module is not None and runs_the_app(module)


def mark_app_tests(items: list[pytest.Item]) -> None:
    """Mark `app` every test of a module that runs the app (APP_SUPPORT), every test function that imports
    one of them or such a test module itself, and every browser test."""
    seen: dict[str, bool] = {}
    for item in items:
        module = getattr(item, "module", None)
        if module is None:
            continue
        if module.__name__ not in seen:
            seen[module.__name__] = runs_the_app(module)
        function = getattr(item, "function", None)
        code_names = getattr(getattr(function, "__code__", None), "co_names", ())
        imports_support = any(imports_the_app(name) for name in code_names)  # a local import
        if seen[module.__name__] or imports_support or item.get_closest_marker("e2e") is not None:
            item.add_marker(pytest.mark.app)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under the "ci" and "fast" profiles every collected property test runs derandomized, without a
    database: `make test` gives the same result every time (issue 13). Tests that run the app are marked
    `app`, those of SLOW_MODULES and SLOW_TESTS `slow`; the fast tier caps the property tests' examples."""
    mark_slow_tests(items)
    mark_app_tests(items)
    profile = settings.get_current_profile_name()
    if profile not in DETERMINISTIC_PROFILES:  # HYPOTHESIS_PROFILE=explore searches on purpose
        return
    if profile == "fast":
        cap_examples(items, FAST_EXAMPLES)
    found = undeterministic_property_tests(items)
    if found:
        raise pytest.UsageError(
            "property tests not derandomized under the ci profile (drop their derandomize=/database= "
            f"settings): {', '.join(found)}"
        )


DATA_DIR = Path(__file__).resolve().parent / "data"


def sample_missing_reason() -> str | None:
    """Why the shipped sample cannot be used, or None when it is there."""
    missing = [f for f in SAMPLE_FILES.values() if not (SAMPLE_DIR / f).exists()]
    return (
        f"shipped sample not generated yet: {', '.join(missing)} missing in {SAMPLE_DIR}" if missing else None
    )


@pytest.fixture
def data_dir() -> Path:
    """tests/data: small good and bad input files."""
    return DATA_DIR


@pytest.fixture(scope="session")
def sample_dataset() -> Dataset:
    """The shipped sample (`engine.io.loaders.load_sample`), loaded and validated once per session."""
    reason = sample_missing_reason()
    if reason:
        pytest.skip(reason)
    from engine.io.loaders import load_sample

    return load_sample()


@pytest.fixture(scope="session")
def sample_groups(sample_dataset: Dataset) -> dict[str, Records]:
    """The shipped sample's cohort, population and (when there is one between them) biobank records,
    as Heatherly's scopes take them (`engine.anonymize.population.compare_scopes`)."""
    from engine.study.runs import biobank_between

    pop, coh = sample_dataset.events, sample_dataset.group_records("cohort")
    out = {"cohort": coh, "population": pop}
    bio = biobank_between(sample_dataset, "population", "cohort", coh, pop)
    if bio is not None:
        out["biobank"] = bio
    return out


@pytest.fixture(scope="session")
def app_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One `streamlit run app.py` (tests/browser_support.py) for every browser test of the session: each
    test opens its own browser page, hence its own Streamlit session. The browser tests share the xdist
    group "browser", so under `make test` they run one after another on one worker beside one server."""
    from browser_support import streamlit_server

    with streamlit_server(tmp_path_factory.mktemp("streamlit")) as url:
        yield url


@contextmanager
def session_setting(name: str, value: str) -> Iterator[None]:
    """The environment variable `name` set to `value` for a test session (each xdist worker), and put
    back as it was afterwards; servers and CLIs the tests start inherit it."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


class _Bugs(logging.Handler):
    """The bugs the app logged under a reference (`ui.errors.reference`), as text with their tracebacks."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("unexpected error"):
            self.seen.append(logging.Formatter().format(record))


@pytest.fixture(autouse=True)
def jobs_read_no_session(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's runs in the app tests go to a pool whose workers raise when a job reads
    `st.session_state` (`apptest_support.trapping_app_pool`): a pool worker has no session, and a job
    reading one got every default silently (issue 38, finding 4: the load options a release records)."""
    if request.node.get_closest_marker("app") is None:
        return
    from apptest_support import trapping_app_pool

    from ui import worker

    monkeypatch.setattr(worker, "_POOL", [trapping_app_pool()])


@pytest.fixture(autouse=True)
def no_bug_shown_as_a_reference(request: pytest.FixtureRequest) -> Iterator[None]:
    """A bug the app showed as "Something went wrong (reference ...)" fails the test that met it, unless
    the test is marked `shows_a_bug` (a test of that very message). The method views' driver catches
    every exception (issue 38, finding 3: one place for the errors), so an AppTest's `not at.exception`
    no longer sees a bug there; this does, on every page."""
    bugs = _Bugs()
    logger = logging.getLogger("cohortshield.ui")
    logger.addHandler(bugs)
    try:
        yield
    finally:
        logger.removeHandler(bugs)
    if bugs.seen and request.node.get_closest_marker("shows_a_bug") is None:
        pytest.fail("the app showed a bug as a reference:\n" + "\n".join(bugs.seen), pytrace=False)


@pytest.fixture(scope="session", autouse=True)
def audit_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every test session writes its audit entries (engine/audit/log.py) to a log of its own, never to
    the checkout's `.cohortshield/audit.log`."""
    path = tmp_path_factory.mktemp("audit") / "audit.log"
    with session_setting("COHORTSHIELD_AUDIT_LOG", str(path)):
        yield path


@pytest.fixture(scope="session", autouse=True)
def study_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every test session saves its users' studies (engine/store, issue 25) to a store of its own, never
    to the checkout's `.cohortshield/store.sqlite3`, which a later session would offer back ("Resume");
    a test of the store itself sets its own."""
    path = tmp_path_factory.mktemp("store") / "store.sqlite3"
    with session_setting("COHORTSHIELD_STORE", str(path)):
        yield path


@pytest.fixture(scope="session", autouse=True)
def data_roots() -> Iterator[None]:
    """The app reads server paths only inside its data roots (engine/io/deployment.py, issue 25): for
    the tests, the shipped sample and the test data; a test of the roots themselves sets its own."""
    root = Path(__file__).resolve().parent.parent
    roots = (str(root / "sample_data"), str(root / "tests" / "data"), str(root / "data"))
    with session_setting("COHORTSHIELD_DATA_ROOTS", os.pathsep.join(roots)):
        yield


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server's SQLAlchemy URL: `COHORTSHIELD_TEST_POSTGRES_URL`, else a throwaway server of
    this session (each xdist worker its own) from Debian's package (tests/pg_support.py); skipped, saying
    why, only when neither is possible."""
    given = os.environ.get("COHORTSHIELD_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    from pg_support import postgres_server

    with postgres_server() as url:
        yield url
