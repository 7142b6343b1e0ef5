"""The dashboard's default Live run, headless: the page as a new user finds it, Start pressed, nothing changed.

``python -m tests.support.default_live_run [--runs-dir DIR]`` drives ``app.py``
through ``streamlit.testing`` with the page's default settings, waits for the
launch to end, and prints the seconds from Start to the end, the machine's
1-minute load average at Start and at the end, the verdict line the page
shows, and each engine's tokens/s × AR with its interval as the run's
summary.csv holds it. It is how the default run's verdict is measured
for the docs; the tests use the same harness on the tiny preset.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from tests.support import ROOT

POLL_S = 0.5
TIMEOUT_S = 900.0


def run_default_live(runs_dir: Path) -> dict[str, object]:
    """One default Live run; what the page and the run files say about it."""
    os.environ["PDV_RUNS_DIR"] = str(runs_dir)
    from streamlit.testing.v1 import AppTest

    from metrics.runs import list_run_dirs, load_run_dir

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    before = {info.path for info in list_run_dirs(runs_dir)}
    load_at_start = os.getloadavg()[0]
    started = time.monotonic()
    at.button(key="live.start").click().run()
    deadline = started + TIMEOUT_S
    while time.monotonic() < deadline:
        at.run()
        rendered = at.session_state["live.rendered"] if "live.rendered" in at.session_state else None
        if rendered is not None and not rendered[1]:
            break
        time.sleep(POLL_S)
    else:
        raise TimeoutError(f"the default Live run did not end within {TIMEOUT_S:.0f} s")
    seconds = time.monotonic() - started
    load_at_end = os.getloadavg()[0]
    if at.exception or at.error:
        raise RuntimeError(f"the page failed: {[e.value for e in (*at.exception, *at.error)]}")
    (new,) = [info.path for info in list_run_dirs(runs_dir) if info.path not in before]
    run = load_run_dir(new)
    summary = run.frames.summary.set_index("engine")
    shown = [e.value for e in (*at.success, *at.info, *at.warning) if "round" in e.value or "busy" in e.value]
    return {
        "run_dir": str(new),
        "seconds_from_start_to_end": round(seconds, 1),
        "load_1m": [round(load_at_start, 2), round(load_at_end, 2)],  # at Start, at the end
        "page": shown,
        "verdict": run.runs[0].get("verdict"),
        "noise_warning": run.runs[0].get("noise_warning"),
        "tok_s_x_ar": {
            e: [round(float(summary.loc[e, c]), 3) for c in ("tok_s_x_ar", "tok_s_x_ar_lo", "tok_s_x_ar_hi")]
            for e in summary.index
        },
        "rounds": int(summary["rounds"].max()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.default_live_run", description=__doc__)
    parser.add_argument("--runs-dir", default="runs", help="where the run's directory is written")
    args = parser.parse_args(argv)
    print(json.dumps(run_default_live(Path(args.runs_dir).resolve()), ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
