"""The script run as the app marks it (`ui.state.running`) and its stop/rerun check (`ui.script_run`),
reached through Streamlit's public API only (issue 38, finding 4).

The AppTests ask Streamlit for a rerun or a stop from another thread while the script waits, as the
server does when the user changes a widget or presses Stop, and check that the wait ends at once with
the exception `is_rerun` names. The tests may import `streamlit.runtime` (the app may not).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException
from streamlit.testing.v1 import AppTest

from ui import script_run, state

ROOT = Path(__file__).resolve().parent.parent

# a wait of up to 20 s on `wait`; 0.3 s in, another thread asks Streamlit for `request` ("rerun"/"stop")
_WAIT = """
import sys, threading, time
sys.path.insert(0, {root!r})
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.script_requests import RerunData
from ui import cache, state
from ui.script_run import is_rerun, yield_check

seen = st.session_state.setdefault("seen", [])
with state.running():
    if not seen:
        requests = get_script_run_ctx().script_requests
        ask = {{"rerun": lambda: requests.request_rerun(RerunData()), "stop": requests.request_stop}}
        threading.Timer(0.3, ask[{request!r}]).start()
        start = time.monotonic()
        try:
            if {wait!r} == "yield_check":
                check = yield_check()
                while time.monotonic() - start < 20:
                    check()
                    time.sleep(0.05)
            else:  # the shared cache's wait on a key another session computes, which never ends here
                shared = cache.Shared(4)
                shared.claim("key")
                shared.wait("key")
            seen.append(("waited", 20.0, False))
        except BaseException as exc:
            seen.append((type(exc).__name__, time.monotonic() - start, is_rerun(exc)))
            raise
    else:
        seen.append(("next run", 0.0, False))
"""


@pytest.mark.parametrize("wait", ["yield_check", "shared"])
def test_a_rerun_ends_a_wait_at_once_and_is_a_rerun(wait: str) -> None:
    at = AppTest.from_string(_WAIT.format(root=str(ROOT), request="rerun", wait=wait), default_timeout=60)
    at.run()
    seen = at.session_state["seen"]
    assert [s[0] for s in seen] == ["RerunException", "next run"], seen
    assert seen[0][1] < 2.0, f"the wait went on {seen[0][1]:.1f} s after the rerun was asked for at 0.3 s"
    assert seen[0][2] is True


def test_a_stop_ends_a_wait_and_is_not_a_rerun() -> None:
    at = AppTest.from_string(
        _WAIT.format(root=str(ROOT), request="stop", wait="yield_check"), default_timeout=60
    )
    at.run()
    seen = at.session_state["seen"]
    assert [s[0] for s in seen] == ["StopException"], seen
    assert seen[0][1] < 2.0 and seen[0][2] is False


def test_is_rerun_tells_streamlits_rerun_from_a_stop() -> None:
    assert script_run.is_rerun(RerunException(None))
    assert not script_run.is_rerun(StopException())
    assert not script_run.is_rerun(KeyboardInterrupt())
    assert not script_run.is_rerun(type("RerunException", (Exception,), {})())  # not Streamlit's


def test_outside_a_script_run_the_check_reads_nothing(monkeypatch) -> None:
    class Unreadable:
        @property
        def session_state(self):
            raise AssertionError("session state read")

    assert not state.in_a_run() and state.session() is None
    monkeypatch.setattr(script_run, "st", Unreadable())
    script_run.yield_check()()
    # in bare Python, Streamlit's stand-in session state holds the token
    with state.running(), pytest.raises(AssertionError, match="session state read"):
        script_run.yield_check()()


_TOKEN = """
import sys
sys.path.insert(0, {root!r})
import streamlit as st
from ui import state

with state.running() as token:
    st.session_state["tokens"] = [*st.session_state.get("tokens", []), (token, state.session(), state.in_a_run())]
st.session_state["after"] = (state.session(), state.in_a_run())
"""


def test_each_session_has_its_own_token_kept_across_its_runs() -> None:
    one = AppTest.from_string(_TOKEN.format(root=str(ROOT)))
    one.run()
    one.run()
    other = AppTest.from_string(_TOKEN.format(root=str(ROOT))).run()
    (a, a_session, inside), (b, _, _) = one.session_state["tokens"]
    assert a == b == a_session and inside
    assert len(a) == 32
    assert other.session_state["tokens"][0][0] != a
    assert one.session_state["after"] == (None, False)
