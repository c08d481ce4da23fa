"""The app's server under a profiler, for the load benchmarks only (`bench/load_ws.py --profile OUT`).

    python -m bench.serve_profiled OUT streamlit run app.py [options]

Runs Streamlit's command line; from SIGUSR1 on (the benchmark sends it when its k changes begin)
yappi profiles every thread (CPU clock: the script threads, the event loop, the cache's threads), and when the server exits (the benchmark stops it with SIGTERM) writes to OUT the
functions by own time and by total time, and the CPU seconds of each thread. yappi is not one of the
project's requirements: `pip install yappi` first. Not a test: figures only.
"""

from __future__ import annotations

import atexit
import faulthandler
import os
import signal
import sys


def _dump(path: str) -> None:
    import io

    import yappi

    yappi.stop()
    out = io.StringIO()
    stats = yappi.get_func_stats()
    for key in ("tsub", "ttot"):
        out.write(f"\n=== functions by {key}\n")
        stats.sort(key, "desc").print_all(
            out=out, columns={0: ("name", 110), 1: ("ncall", 10), 2: ("tsub", 8), 3: ("ttot", 8)}
        )
    out.write("\n=== threads\n")
    yappi.get_thread_stats().sort("ttot", "desc").print_all(out=out)
    with open(path, "w") as f:
        f.write(out.getvalue())


def main() -> None:
    import yappi

    path, argv = sys.argv[1], sys.argv[2:]
    faulthandler.register(signal.SIGUSR2, all_threads=True)  # every thread's stack on stderr (the log)
    yappi.set_clock_type("cpu")

    if path == "-":  # no profile: the stacks alone (SIGUSR2)
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        sys.argv = argv
        from streamlit.web import cli as plain

        plain.main(prog_name="streamlit")
        return

    def restart(signum, frame) -> None:  # the benchmark's k changes begin: what came before is left out
        yappi.stop()
        yappi.clear_stats()
        yappi.start(builtins=False, profile_threads=True)

    signal.signal(signal.SIGUSR1, restart)
    os.register_at_fork(after_in_child=yappi.stop)  # a worker is not profiled (nor slowed)
    atexit.register(_dump, path)
    from streamlit.web import cli

    sys.argv = argv
    cli.main(prog_name="streamlit")


if __name__ == "__main__":
    main()
