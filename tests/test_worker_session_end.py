"""A worker whose tab closed is killed and reaped (issue 40, low finding: "a worker whose tab closed stays
a zombie for over 60 s").

A served script (Streamlit's websocket protocol, as bench/load_ws.py speaks it) starts a worker that
runs until killed; a rerun that no longer asks for it leaves it running (ui/worker.py: a rerun may take
it up again); then the client disconnects. The session's end must kill the child and reap it. The
bound is generous: it only tells "within seconds" from "never" (the sweep of abandoned workers comes 60
s later, and only with the next run of some session).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from browser_support import ROOT, free_port, served_app

from engine.scale import pool

pytestmark = pytest.mark.skipif(not pool.enabled(), reason="workers are turned off (COHORTSHIELD_WORKERS=0)")

_SCRIPT = """
import os, time
import streamlit as st
from ui import progress

def forever(step):
    with open({pidfile!r}, "w") as f:
        f.write(str(os.getpid()))
    while True:
        step(0.5, "working")
        time.sleep(0.1)

if st.checkbox("run", value=True, key="go"):
    progress.run("Forever", forever, key="forever", job=1, probe=False)
st.write("idle")
"""
_GONE_WITHIN_S = 30.0


def _state(pid: int) -> str | None:
    """The process's state letter (Z: a zombie not reaped), None when it is gone (reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


async def _leave_a_worker_then_close(base: str, pidfile: Path) -> int:
    """Open the page, wait for its worker, rerun with the checkbox off (the worker is left running,
    as after a rerun elsewhere on the page), wait for that run to finish, then close the socket."""
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    def rerun(box: str | None) -> bytes:
        msg = BackMsg()
        msg.rerun_script.query_string = ""
        if box is not None:
            w = msg.rerun_script.widget_states.widgets.add()
            w.id, w.bool_value = box, False
        return msg.SerializeToString()

    url = base.replace("http://", "ws://") + "/_stcore/stream"
    async with websockets.connect(url, subprotocols=["streamlit"], origin=base, max_size=None) as ws:
        await ws.send(rerun(None))
        box = None
        deadline = time.monotonic() + 120
        while box is None or not pidfile.exists() or not pidfile.read_text():
            assert time.monotonic() < deadline, "the worker never started"
            try:
                frame = await asyncio.wait_for(ws.recv(), timeout=0.2)
            except TimeoutError:
                continue
            if isinstance(frame, bytes):
                msg = ForwardMsg.FromString(frame)
                if (
                    msg.WhichOneof("type") == "delta"
                    and msg.delta.new_element.WhichOneof("type") == "checkbox"
                ):
                    box = msg.delta.new_element.checkbox.id
        pid = int(pidfile.read_text())
        await ws.send(rerun(box))
        ok = ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY
        async for frame in ws:
            if isinstance(frame, bytes):
                msg = ForwardMsg.FromString(frame)
                if msg.WhichOneof("type") == "script_finished" and msg.script_finished == ok:
                    break
        assert _state(pid) not in (None, "Z"), "the rerun should leave the worker running"
    return pid


def test_a_closed_sessions_worker_is_killed_and_reaped(tmp_path: Path) -> None:
    pidfile = tmp_path / "worker.pid"
    script = tmp_path / "forever.py"
    script.write_text(_SCRIPT.format(pidfile=str(pidfile)))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COHORTSHIELD_WORKERS": "1"}
    with served_app(free_port(), tmp_path / "streamlit.log", script=script, env=env) as base:
        pid = asyncio.run(_leave_a_worker_then_close(base, pidfile))
        deadline = time.monotonic() + _GONE_WITHIN_S
        while _state(pid) is not None and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _state(pid)
        if left is not None:
            os.kill(pid, 9)  # not left behind by the test
        assert left is None, f"the closed session's worker {pid} is still there (state {left})"
