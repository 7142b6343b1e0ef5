"""The metrics package loads without torch or streamlit (the CSV readers must stay light)."""

from __future__ import annotations

import subprocess
import sys

from tests.support import ROOT as ROOT_DIR

ROOT = ROOT_DIR


def test_metrics_imports_neither_torch_nor_streamlit():
    modules = sorted(p.stem for p in (ROOT / "metrics").glob("*.py") if p.stem != "__init__")
    assert "timeseries" in modules
    code = "; ".join(f"import metrics.{m}" for m in modules)
    code += "; import sys; print(sorted(m for m in ('torch', 'streamlit') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
