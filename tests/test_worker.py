"""The app's long runs in worker processes (issue 24, ui/worker.py and ui/progress.py): a rerun leaves
the worker running and the next run for the same job takes it up; a run for another job, or Cancel,
kills it; what the worker stored in the app's cache comes back; the page's run happens elsewhere."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from apptest_support import page_app

from engine.scale import pool

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not pool.enabled(), reason="workers are turned off (COHORTSHIELD_WORKERS=0)")


class _Tracker:
    """ui.progress.Tracker's two faces: called with reports, `check` deciding whether to wait on."""

    def __init__(self, patience: int | None = None) -> None:
        self.seen: list[tuple[float, str]] = []
        self.patience = patience  # reports seen before the script run is superseded

    def __call__(self, fraction: float, message: str = "") -> None:
        self.seen.append((fraction, message))

    def check(self) -> None:
        from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

        if self.patience is not None and len(self.seen) >= self.patience:
            raise RerunException(None)


def _slow(progress) -> int:
    for i in range(8):
        progress(i / 8, f"step {i}")
        time.sleep(0.1)
    return os.getpid()


def _long(progress) -> int:
    """A run of some 30 s, killed before it ends (the `session` fixture cancels what a test left)."""
    for i in range(300):
        progress(i / 300, f"step {i}")
        time.sleep(0.1)
    return os.getpid()


@pytest.fixture
def session():
    import streamlit as st

    from ui import worker

    yield st.session_state
    for key in list(st.session_state.get(worker._WORKERS, {})):
        worker.cancel(key)


def _pid_at(session, key: str) -> int:
    """The pid of this session's worker at `key`, or of the superseded one finishing there."""
    from ui import worker

    mine = session[worker._WORKERS]
    return (mine.get(key) or mine[worker._FINISHING + key]).worker.pid


def _within_5_s(done) -> None:
    """Return once `done()` holds, after 5 s at most (the test's assertion then says what did not)."""
    for _ in range(100):
        if done():
            return
        time.sleep(0.05)


def _ended(pid: int) -> bool:
    """Whether the worker `pid` runs no job: gone, or back in the app's pool, idle."""
    from ui import worker

    return not _alive(pid) or pid in [w.process.pid for w in worker.app_pool()._idle]


def _gone(pid: int) -> bool:
    """Whether the process `pid` has ended, within 5 s (a killed worker is reaped by its fork server,
    not by this process: for a moment it may still be there)."""
    _within_5_s(lambda: not _alive(pid))
    return not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_rerun_leaves_the_worker_running_and_the_same_job_takes_it_up(session) -> None:
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

    from ui import worker

    with pytest.raises(RerunException):
        worker.run(_slow, _Tracker(patience=2), key="k", job=("data", 5))
    assert worker.underway("k", ("data", 5))
    first = session[worker._WORKERS]["k"].worker.pid
    again = _Tracker()
    pid = worker.run(_slow, again, key="k", job=("data", 5))
    assert pid == first, "the run was started again instead of taken up"
    assert again.seen[0][1] == "step 1"  # it showed where the worker was, then went on
    assert not worker.underway("k", ("data", 5))


def test_another_job_at_the_same_place_kills_the_superseded_worker(session) -> None:
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

    from ui import worker

    with pytest.raises(RerunException):
        worker.run(_slow, _Tracker(patience=1), key="k", job=("data", 5))
    old = _pid_at(session, "k")
    pid = worker.run(_slow, _Tracker(), key="k", job=("data", 6))
    assert pid != old and _gone(old)


def test_cancel_kills_the_worker_at_once(session) -> None:
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

    from ui import worker

    with pytest.raises(RerunException):
        worker.run(_slow, _Tracker(patience=1), key="k", job=1)
    pid = session[worker._WORKERS]["k"].worker.pid
    worker.cancel("k")
    assert _gone(pid) and not worker.underway("k", 1)


def test_an_abandoned_worker_is_killed_by_the_next_run(session, monkeypatch) -> None:
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

    from ui import worker

    with pytest.raises(RerunException):
        worker.run(_slow, _Tracker(patience=1), key="away", job=1)
    pid = session[worker._WORKERS]["away"].worker.pid
    monkeypatch.setattr(worker, "_ABANDONED_S", 0.0)
    worker.run(lambda progress: 1, _Tracker(), key="elsewhere", job=2)
    assert _gone(pid)


_SCRIPT = """
import os, sys
sys.path.insert(0, {root!r})
import streamlit as st
from ui import cache, progress

def compute(step):
    def work():
        with open({count!r}, "a") as f:
            f.write("x")
        step(0.5, "half")
        return os.getpid()
    return cache.memo("worker test", "the key", work, size=2)

st.write(f"pid: {{progress.run('The job', compute, key='job', job=1)}}")
st.write(f"here: {{os.getpid()}}")
st.button("again", key="again")
"""


def test_a_pages_run_happens_in_a_worker_and_its_cache_entry_comes_back(tmp_path: Path, monkeypatch) -> None:
    """The first run starts a worker; the rerun finds the worker's cache entry here and shows it
    without starting another (the probe, `ui.cache.only_held`)."""
    from streamlit.testing.v1 import AppTest

    started = []
    original = pool.Pool.submit

    def counting(self, *args, **kwargs):
        started.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pool.Pool, "submit", counting)

    count = tmp_path / "count"
    at = AppTest.from_string(_SCRIPT.format(root=str(ROOT), count=str(count)), default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    texts = [m.value for m in at.markdown]
    pid = next(t for t in texts if t.startswith("pid: ")).split()[-1]
    here = next(t for t in texts if t.startswith("here: ")).split()[-1]
    assert pid != here, "the run was not in a worker"
    assert count.read_text() == "x"
    at.button(key="again").click().run()
    assert not at.exception
    assert count.read_text() == "x", "the worker's cache entry did not come back: computed again"
    assert f"pid: {pid}" in [m.value for m in at.markdown]
    assert len(started) == 1, "a worker was started for a result already held"
    # issue 38, finding 4: the worker is not a fork of this (the server's) process
    assert _parent_of(int(pid)) != os.getpid()


def _parent_of(pid: int) -> int:
    """The parent pid of `pid` (Linux's /proc)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_the_method_views_run_in_workers_and_agree_with_the_script_thread(monkeypatch) -> None:
    """GCCens' view on the sample: the same release whether its run is in a worker or in this thread."""
    from ui import cache

    out = {}
    for workers in ("1", "0"):
        monkeypatch.setenv("COHORTSHIELD_WORKERS", workers)
        cache.clear()
        at = page_app(view=("ui.views.gccens", "render_anonymize"))
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        at.button(key="gcc_study_add").click().run()
        assert not at.exception, [e.value for e in at.exception]
        release = at.session_state["study"].releases[0]
        # release.csv names patients by the session's own pseudonyms: its sha256 differs by session
        code_map = dict(release.files)["code_map.csv"]
        out[workers] = (code_map, release.verification, release.settings, release.data)
    assert out["1"] == out["0"]
    assert out["1"][1] is not None and out["1"][1].ok


def test_a_worker_waited_on_is_never_taken_for_abandoned(session, monkeypatch) -> None:
    """A long run (minutes on a large cohort) is not killed by another session's sweep while its own
    session waits for it: only a worker nobody waits on or took up ages."""
    import threading

    from ui import worker

    monkeypatch.setattr(worker, "_ABANDONED_S", 0.2)
    sweeps = threading.Timer(0.6, worker._sweep)  # another session's run, 0.6 s into this one
    sweeps.start()
    try:
        pid = worker.run(_slow, _Tracker(), key="long", job=1)  # 0.8 s
    finally:
        sweeps.join()
    assert pid != os.getpid()


def test_a_worker_that_cannot_start_ends_its_claim(session, monkeypatch) -> None:
    """A worker that cannot start (no memory for the process) must not leave a shared key claimed: other sessions
    would wait for a worker that never stores it."""
    from ui import worker

    def no_process(*args, **kwargs):
        raise OSError("Cannot allocate memory")

    monkeypatch.setattr(pool.Pool, "submit", no_process)
    ended: list[bool] = []
    with pytest.raises(OSError, match="allocate memory"):
        worker.run(_slow, _Tracker(), key="k", job=1, end=lambda: ended.append(True))
    assert ended == [True] and not worker.underway("k", 1)


def _kernel_signatures(progress) -> dict[str, int]:
    """In a worker: how many compiled signatures each kernel entry the methods call holds."""
    from engine.anonymize import alignment_kernel, censor_kernel, profiles_kernel
    from engine.scale import trie
    from engine.utility import membership_kernel

    entries = {
        "membership counts": membership_kernel.null_counts,
        "profiles run": profiles_kernel.run,
        "constraint supports": profiles_kernel.constraint_supports,
        "alignment": alignment_kernel.ags_trace,
        "censor run": censor_kernel.run,
        "censor exit steps": censor_kernel.exit_steps,
        "risk walk": trie.walk,
    }
    return {name: len(d.signatures) for name, d in entries.items()}


def test_a_worker_starts_with_the_loaded_kernels() -> None:
    """Bug report (issue 24): every worker loaded numba's target and each kernel again (0.2-0.3 s of
    every UGACLIP / ACLIP, LDA and GCCens run through the app). The app's pool's fork server loads
    them once (`engine.scale.preload_kernels`): a worker holds every kernel entry the methods call,
    without calling any."""
    from ui import worker

    loaded = worker.app_pool().call(_kernel_signatures)
    assert all(n >= 1 for n in loaded.values()), loaded


def test_a_failed_preload_leaves_the_fork_server_working(tmp_path: Path) -> None:
    """No shipped sample (or any failure of the warm-up) in the fork server's preload: logged, and the
    import goes on (a fork server whose preload raised would not start)."""
    import subprocess

    code = (
        "import engine.anonymize.warm as w\n"
        "def boom():\n    raise FileNotFoundError('no sample here')\n"
        "w.load_kernels = boom\n"
        "import engine.scale.preload_kernels\n"
        "print('imported')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert out.returncode == 0 and "imported" in out.stdout, out.stderr
    assert "the kernels were not loaded ahead" in out.stderr and "no sample here" in out.stderr


def test_the_workers_start_ahead_once_the_run_has_ended(monkeypatch) -> None:
    """`preload_ahead`: the app's pool and its workers are started after the script run that loaded
    the data has ended, once per process."""
    import threading

    from ui import worker

    starts: list[int] = []
    monkeypatch.setattr(worker, "_POOL", [])

    class _Pool:
        def start(self, n: int) -> None:
            starts.append(n)

    monkeypatch.setattr(worker, "app_pool", lambda: worker._POOL.append(_Pool()) or worker._POOL[0])
    release = threading.Event()
    run = threading.Thread(target=release.wait)
    run.start()
    ahead = worker.preload_ahead(run)
    assert ahead is not None
    time.sleep(0.2)
    assert starts == [], "started before the run ended"
    release.set()
    ahead.join(5)
    assert starts == [2] and worker.preload_ahead(run) is None


class _Sample:
    """Stands for the shipped sample (marked shipped as `ui.cache.load_shipped` marks it)."""


def _storing_shared(sample: _Sample):
    """A job storing a shared entry derived from `sample` (which travels with it, marked shipped)."""

    def compute(progress) -> int:
        from ui import cache

        progress(0.0, "start")
        time.sleep(0.5)
        cache.put("test superseded", "answer", os.getpid(), size=2, data=sample)
        return os.getpid()

    return compute


_SAMPLE = _Sample()
_stores_shared = _storing_shared(_SAMPLE)


def test_a_superseded_run_with_a_shared_result_finishes_and_stores_it(session) -> None:
    """Issue 40, finding 7: a k typed over another killed the first k's run; one whose result is
    shared now finishes in the background and its entry lands in the process-wide cache."""
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

    from ui import cache, worker

    cache._mark(_SAMPLE)
    ended: list[bool] = []
    with pytest.raises(RerunException):
        worker.run(_stores_shared, _Tracker(patience=1), key="k", job=5, end=lambda: ended.append(True))
    old = _pid_at(session, "k")
    worker.run(_slow, _Tracker(), key="k", job=6)
    _within_5_s(lambda: ended)
    assert ended, "the superseded run's claim never ended"
    assert cache.held("test superseded", "answer", data=_SAMPLE) == old
    assert _ended(old)
    assert worker._FINISHING + "k" not in session[worker._WORKERS]


def test_a_place_lets_one_superseded_run_finish_and_kills_the_next(session) -> None:
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

    from ui import worker

    pids = []
    for job, compute in ((1, _long), (2, _slow)):  # the first still runs when asked about (killed after)
        with pytest.raises(RerunException):
            worker.run(compute, _Tracker(patience=1), key="k", job=job, end=lambda: None)
        pids.append(_pid_at(session, "k"))
    # the first finishes in the background, the second is killed by the third
    worker.run(lambda progress: os.getpid(), _Tracker(), key="k", job=3)
    assert _gone(pids[1])
    finishing = session[worker._WORKERS].get(worker._FINISHING + "k")
    assert finishing is not None and finishing.worker.pid == pids[0]


def test_a_superseded_run_ends_its_claim_when_the_next_run_finds_its_result_held(session) -> None:
    """Issue 40, finding 7 (16 sessions on the sample): a run superseded while its worker computed k = 10
    kept the worker and its claim on the shared key when the next run, at a k already held, needed no
    worker (`ui.progress.run`'s probe). Nothing took the worker up: the claim held until the sweep, 60 s
    later, and every session asking k = 10 waited for it until its own run was superseded (over a second
    at every visit). Now the next run at that place lets the superseded one finish: its result stored,
    its claim ended."""
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

    from ui import cache, progress, worker

    cache._mark(_SAMPLE)
    cache.put("test held", 6, "held", size=2, data=_SAMPLE)
    ended: list[bool] = []
    with pytest.raises(RerunException):
        worker.run(_stores_shared, _Tracker(patience=1), key="k", job=5, end=lambda: ended.append(True))
    old = _pid_at(session, "k")

    def held(step) -> str:
        return cache.memo("test held", 6, lambda: "computed", size=2, data=_SAMPLE)

    assert progress.run("Test", held, key="k", job=6) == "held"
    _within_5_s(lambda: ended)
    assert ended, "the superseded run's claim never ended"
    assert cache.held("test superseded", "answer", data=_SAMPLE) == old
    assert _ended(old)


def test_two_places_superseded_together_both_finish_and_store_their_results(session) -> None:
    """Issue 40, finding 7: the Anonymize page runs the release and the compared variant at each k, in
    two places. With one finishing run per session, the compared run superseded with the release's was
    killed at every change and its claim ended without a result: on 16 sessions no one ever held it, and
    every visit of that k waited over a second. Each place now lets its own superseded run finish, and a
    run that already ended is stored, not thrown away."""
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

    from ui import cache, worker

    cache._mark(_SAMPLE)
    ended: dict[str, bool] = {}

    def storing(name: str, sample: _Sample = _SAMPLE):
        def compute(progress) -> int:
            progress(0.0, "start")
            time.sleep(0.3)
            cache.put("test two places", name, os.getpid(), size=4, data=sample)
            return os.getpid()

        return compute

    pids = {}
    for place in ("release", "compared"):
        with pytest.raises(RerunException):
            worker.run(
                storing(place),
                _Tracker(patience=1),
                key=place,
                job=5,
                end=lambda p=place: ended.setdefault(p, True),
            )
        pids[place] = _pid_at(session, place)
    time.sleep(1.0)  # the compared one has ended by now: its result waits in its pipe
    for place in ("release", "compared"):
        worker.settle(place, 6)
    _within_5_s(lambda: len(ended) == 2)
    assert ended == {"release": True, "compared": True}
    for place in ("release", "compared"):
        assert cache.held("test two places", place, data=_SAMPLE) == pids[place], place


def test_a_superseded_run_with_a_shared_result_finishes_though_its_session_never_asks_again(
    session,
) -> None:
    """Issue 40, finding 7 (16 sessions on the sample): a session whose run at k = 10 was superseded
    while its worker computed never asked for that place again (the page showed the study's preview of
    each k from then on), so the worker's claim on the shared key held until the session ended, and
    every session asking k = 10 waited on it until its own run was superseded: over a second at every
    visit. A superseded run holding a shared claim now finishes in the background at once."""
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

    from ui import cache, worker

    cache._mark(_SAMPLE)
    ended: list[bool] = []
    with pytest.raises(RerunException):
        worker.run(_stores_shared, _Tracker(patience=1), key="k", job=5, end=lambda: ended.append(True))
    _within_5_s(lambda: ended)
    assert ended, "the superseded run's claim waited for its session to come back"
    assert isinstance(cache.held("test superseded", "answer", data=_SAMPLE), int)


def test_a_run_that_ended_while_superseded_is_taken_up_by_its_job(session) -> None:
    """A worker whose run was superseded and which then ended is still its job's: the next run for
    that job reads its result (the probe waited on the session's own claim before)."""
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

    from ui import worker

    with pytest.raises(RerunException):
        worker.run(
            lambda progress: (progress(0.0, "x"), time.sleep(0.2), os.getpid())[-1],
            _Tracker(patience=1),
            key="k",
            job=5,
        )
    pid = session[worker._WORKERS]["k"].worker.pid
    time.sleep(0.8)
    assert worker.underway("k", 5)
    assert worker.run(lambda progress: -1, _Tracker(), key="k", job=5) == pid


def test_a_job_whose_worker_was_killed_meanwhile_starts_afresh(session) -> None:
    """A superseded run's worker killed by the sweep of abandoned workers stays in its session's
    places; the next run of that job took it up and failed ("the worker process ended without a
    result"). It now starts the job again."""
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

    from ui import worker

    with pytest.raises(RerunException):
        worker.run(_slow, _Tracker(patience=1), key="k", job=5)
    swept = session[worker._WORKERS]["k"]
    swept.stop()  # as `_sweep` does, 60 s after its last wait
    assert not worker.underway("k", 5)
    pid = worker.run(_slow, _Tracker(), key="k", job=5)
    assert pid != swept.worker.pid


def _two_steps(folder: str, data: object = None, key: int = 1):
    """A job of two memoized steps, each counted when computed (in whichever process computes it)."""

    def compute(progress) -> str:
        from apptest_support import Counts

        from ui import cache

        counts = Counts(Path(folder))

        def step(name: str) -> str:
            counts.add(name)
            return name.lower()

        a = cache.memo("test step A", key, lambda: step("A"), size=2, data=data)
        b = cache.memo("test step B", key, lambda: step("B"), size=2, data=data)
        return a + b

    return compute


def test_a_job_asks_the_session_for_what_it_holds_instead_of_computing_it(session, tmp_path) -> None:
    """Issue 38, finding 4: a job in a worker of the pool starts with no cache (not a copy of the
    server's, as a fork was). What the session holds is asked of it (`ui.cache.answerer`), not computed
    again; what the job computes comes back and is held here."""
    from apptest_support import Counts

    from ui import cache, worker

    cache.put("test step A", 1, "held a", size=2)
    got = worker.run(_two_steps(str(tmp_path)), _Tracker(), key="k", job=1)
    counts = Counts(tmp_path)
    assert got == "held ab"
    assert counts["A"] == 0, "the job computed what the session held"
    assert counts["B"] == 1
    assert cache.held("test step B", 1) == "b", "what the job computed did not come back"


def test_a_job_on_the_shipped_sample_reads_the_shared_store_and_fills_it(session, tmp_path) -> None:
    """The same for results every session shares (the shipped sample's): read from the process-wide
    store, and what the job computes lands there, not in this session's store."""
    from apptest_support import Counts

    from ui import cache, worker

    sample = _Sample()
    cache._mark(sample)
    cache.put("test step A", 2, "shared a", size=2, data=sample)
    got = worker.run(_two_steps(str(tmp_path), sample, key=2), _Tracker(), key="k", job=2)
    assert got == "shared ab" and Counts(tmp_path)["A"] == 0
    assert cache.held("test step B", 2, data=sample) == "b"
    assert cache.held("test step B", 2) is None, "a shared result was held as the session's"
