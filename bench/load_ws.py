"""The 8-session load test of issue 13, without browsers: the server alone on this machine's cores.

bench/load.py drives Chromium pages; on a 2-core machine the eight pages' rendering takes most of the
CPU (about 88 of the 127 CPU seconds one run used, the server 39), so what it measures is mostly the
browsers. This one speaks Streamlit's own websocket protocol instead (the messages the browser sends
and receives: `BackMsg.rerun_script` with the widgets' states, `ForwardMsg.script_finished`), so the
eight sessions cost the harness almost nothing and every figure is the server's: the same sessions,
pages and k changes, the same health poller in a process of its own, the same printout.

A session opens its page (`ClientState.page_name`), waits for its first run, finds the sidebar's k
widget among the elements it was sent (the widget whose id ends with the user key `-k`), then sends a
rerun with k's new value, as the browser does when the user types a value and presses Enter. A change
superseded by the next one before a run finished counts until the run that finally finished.

    .venv/bin/python -m bench.load_ws --sessions 8 --duration 30 [--rate 1] [--pages anonymize,phewas,,risk]
        [--profile OUT]  (the server under yappi from the k changes on: bench/serve_profiled.py; "-": none,
        SIGUSR2 to the server writes every thread's stack to its log)

Before and after the app's runs moved from forked children of the server to the process pool (issue 38,
finding 4; 2026-11-29 17:38-17:40, `--sessions 8 --duration 30`, 240 k changes each; before 792a601,
after e22caa2): rerun completion p95 0.11 -> 0.08 s, max 0.62 -> 0.45 s (anonymize p95 0.52 -> 0.34 s);
health p95 0.016 -> 0.012 s, max 0.036 -> 0.145 s (during the first loads); server CPU per run after the
first k change 46 -> 44 ms. Issue 13's and 24's targets met both times.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.load import (
    K_VALUES,
    ROOT,
    Health,
    _cpu,
    change_waits,
    free_port,
    print_targets,
    print_waits_and_health,
    start_server,
)


class Session:
    """One websocket session on a page: its k changes and the times its runs finished."""

    def __init__(self, base: str, page: str) -> None:
        self.url = base.replace("http://", "ws://") + "/_stcore/stream"
        self.origin = base
        self.page = page
        self.name = page or "cohort"
        self.k_id: str | None = None
        self.page_hash = ""
        self.k = 5
        self.changes: list[float] = []
        self.finished: list[float] = []  # monotonic times of FINISHED_SUCCESSFULLY
        self.first: asyncio.Event = asyncio.Event()
        self.ws = None
        self.opened = time.monotonic()

    def _rerun(self, widgets: list | None = None) -> bytes:
        from streamlit.proto.BackMsg_pb2 import BackMsg

        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = ""
        state.page_name = self.page
        state.page_script_hash = self.page_hash
        for widget_id, value in widgets or []:
            w = state.widget_states.widgets.add()
            w.id = widget_id
            w.int_value = value
        return msg.SerializeToString()

    async def run(self) -> None:
        import websockets
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        ok = ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY
        async with websockets.connect(
            self.url, subprotocols=["streamlit"], origin=self.origin, max_size=None
        ) as ws:
            self.ws = ws
            await ws.send(self._rerun())
            async for frame in ws:
                if isinstance(frame, str):
                    continue
                msg = ForwardMsg.FromString(frame)
                kind = msg.WhichOneof("type")
                if kind == "new_session":
                    self.page_hash = msg.new_session.page_script_hash or self.page_hash
                elif kind == "page_info_changed":
                    pass
                elif kind == "delta" and self.k_id is None:
                    element = msg.delta.new_element
                    if element.WhichOneof("type") == "number_input" and element.number_input.id.endswith(
                        "-k"
                    ):
                        self.k_id = element.number_input.id
                elif kind == "script_finished" and msg.script_finished == ok:
                    self.finished.append(time.monotonic())
                    self.first.set()

    async def change_k(self) -> None:
        self.k = K_VALUES[(K_VALUES.index(self.k) + 1) % len(K_VALUES)]
        self.changes.append(time.monotonic())
        await self.ws.send(self._rerun([(self.k_id, self.k)]))

    def waits(self, end: float) -> list[float]:
        return change_waits(self.changes, self.finished, end)


async def drive(
    base: str,
    pages: list[str],
    n: int,
    duration: float,
    rate: float,
    first_load: float,
    health,
    profiled: int | None = None,
    on_changes: Callable[[], None] | None = None,
) -> tuple[list[Session], float]:
    sessions = [Session(base, pages[i % len(pages)]) for i in range(n)]
    tasks = [asyncio.create_task(s.run()) for s in sessions]
    ready = []
    for i, s in enumerate(sessions):
        try:
            await asyncio.wait_for(s.first.wait(), timeout=max(s.opened + first_load - time.monotonic(), 1))
        except TimeoutError:
            print(f"session {i + 1} ({s.name}): first run not finished {first_load:.0f} s after opening")
            continue
        if s.k_id is None:
            print(f"session {i + 1} ({s.name}): no k widget found")
            continue
        print(
            f"session {i + 1} ({s.name}): first run finished {s.finished[0] - s.opened:.1f} s after opening"
        )
        ready.append(s)
    if not ready:
        raise SystemExit("no session rendered its first page")
    health.phase("k changes")
    if on_changes is not None:
        on_changes()
    if profiled is not None:
        os.kill(profiled, signal.SIGUSR1)  # bench/serve_profiled.py: profile from here on
    interval = 1.0 / (rate * len(ready))
    start = time.monotonic()
    i = 0
    while time.monotonic() - start < duration:
        await ready[i % len(ready)].change_k()
        i += 1
        await asyncio.sleep(max(start + i * interval - time.monotonic(), 0.0))
    settle = time.monotonic() + 30
    while time.monotonic() < settle and any(not s.finished or s.finished[-1] < s.changes[-1] for s in ready):
        await asyncio.sleep(0.1)
    end = time.monotonic()
    for s in sessions:
        if s.ws is not None:
            await s.ws.close()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return ready, end


def main(argv: list[str] | None = None) -> int:
    import psutil

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of k changes (at most 300)")
    ap.add_argument("--rate", type=float, default=1.0, help="k changes per second per session (issue 24: 1)")
    ap.add_argument("--pages", default="anonymize,phewas,,risk", help="URL paths, cycled over sessions")
    ap.add_argument(
        "--config", action="append", default=[], help="server option, e.g. runner.fastReruns=true"
    )
    ap.add_argument("--first-load", type=float, default=180.0)
    ap.add_argument(
        "--profile", type=Path, help="write the server's yappi profile here (bench/serve_profiled.py)"
    )
    args = ap.parse_args(argv)
    duration = min(max(args.duration, 1.0), 300.0)
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="cohortshield-load-ws-")) / "server.log"
    print(f"server on localhost:{port}, log {log}, options {args.config or 'none'}")
    server = start_server(port, args.config, log, ROOT, args.profile)
    proc = psutil.Process(server.pid)
    health = Health(port)
    cpu_start, wall_start = _cpu(proc), time.monotonic()
    harness_start = _cpu(psutil.Process())
    at_changes: list[float] = []  # the server's CPU and the finished runs when the k changes began
    try:
        health.start()
        sessions, end = asyncio.run(
            drive(f"http://localhost:{port}", args.pages.split(","), min(max(args.sessions, 1), 32),
                  duration, args.rate, args.first_load, health, server.pid if args.profile else None,
                  lambda: at_changes.append(_cpu(proc)))
        )  # fmt: skip
        health.phase("after close")
        closed = time.monotonic()
        cpu_test = _cpu(proc) - cpu_start
        cpu_harness = _cpu(psutil.Process()) - harness_start
        time.sleep(10)
        cpu_after = (_cpu(proc) - cpu_start - cpu_test) / (time.monotonic() - closed)
    finally:
        health.stop()
        server.terminate()
        try:
            server.wait(timeout=60 if args.profile else 10)
        except subprocess.TimeoutExpired:
            server.kill()
    waits: dict[str, list[float]] = {}
    for s in sessions:
        waits.setdefault(s.name, []).extend(s.waits(end))
    every = print_waits_and_health(
        waits, health, f"in {duration:.0f} s over {len(sessions)} sessions ({args.rate:g} per second each)"
    )
    wall = closed - wall_start
    print(
        f"CPU from start to the last client closed ({wall:.0f} s wall, {os.cpu_count()} cores): server {cpu_test:.0f} s, this harness {cpu_harness:.0f} s"
    )
    print(f"server CPU in the 10 s after every client closed: {cpu_after:.0%} of a core")
    runs = sum(len(s.finished) for s in sessions)
    print(
        f"runs finished: {runs} ({cpu_test / max(runs, 1) * 1000:.0f} ms of server CPU per run, first loads included)"
    )
    if at_changes:
        steady = sum(len([f for f in s.finished if f > s.changes[0]]) for s in sessions if s.changes)
        cpu_changes = cpu_start + cpu_test - at_changes[0]
        print(
            f"from the first k change on: {steady} runs, {cpu_changes:.1f} s of server CPU "
            f"({cpu_changes / max(steady, 1) * 1000:.0f} ms per run)"
        )
    print_targets(every, health)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
