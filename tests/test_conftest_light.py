"""The shared conftest loads nothing heavy, so a pure test (metrics, plans, parsers) runs without torch or a model."""

import subprocess
import sys

from tests.support import ROOT

HEAVY = ("torch", "transformers", "streamlit", "plotly", "engine")


def test_importing_the_conftest_loads_no_torch_model_code_streamlit_or_plotly():
    check = (
        "import sys, tests.conftest; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    done = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
