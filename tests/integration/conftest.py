import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pkt"))

from harness import Processes  # noqa: E402


@pytest.fixture
def procs(tmp_path):
    """Every process started through this fixture is stopped at teardown."""
    p = Processes(tmp_path)
    try:
        yield p
    finally:
        p.close()
