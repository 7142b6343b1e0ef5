"""What several test folders share: the repository root, reference decoders, servers, sampling statistics.

Each module here imports its heavy dependencies itself, so a pure test that needs only ``ROOT`` loads no model.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
