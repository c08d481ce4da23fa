"""The server's heap is frozen once, after its first run with data (ui/heap.py, issue 24).

Bug report (measured on the Heatherly completion pass, AppTest): about one run in three took 0.14 s
longer, a full collection of the server's 200,000 tracked objects falling inside the page's run.
"""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest

from ui import heap

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fresh_heap(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """`ui.heap` as in a new process, with `gc.freeze` recorded instead of done."""
    calls: list[int] = []
    monkeypatch.setattr(heap, "_SETTLED", [])
    monkeypatch.setattr(gc, "freeze", lambda: calls.append(1))
    return calls


def test_no_freeze_before_data(fresh_heap: list[int]) -> None:
    assert heap.settle(data_loaded=False) is False
    assert fresh_heap == [] and not heap.settled()


def test_freezes_once(fresh_heap: list[int]) -> None:
    assert heap.settle(data_loaded=True) is True
    assert heap.settle(data_loaded=True) is False
    assert fresh_heap == [1] and heap.settled()


_SCRIPT = """
import gc, sys
sys.path.insert(0, {root!r})
from tests.apptest_support import page_app
from ui import heap
assert gc.get_freeze_count() == 0 and not heap.settled()
at = page_app("pages/cohort.py")
at.run()
assert not at.exception, [e.value for e in at.exception]
frozen = gc.get_freeze_count()
at.run()
print(heap.settled(), frozen, gc.get_freeze_count() <= frozen)
"""


def test_the_app_run_freezes_its_heap() -> None:
    """Through the sidebar and a page as app.py runs them: after the first run with the sample loaded
    the heap is frozen (the libraries and the sample: over 100,000 objects); a second run adds none."""
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(root=str(ROOT))],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    settled, frozen, not_refrozen = out.stdout.split()[-3:]
    assert settled == "True" and int(frozen) > 100_000 and not_refrozen == "True"
