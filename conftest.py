"""Root conftest: make `import minattn` resolve to *this* checkout (teacher's or student's copy),
even when another copy is installed in the environment."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent)
if sys.path[0] != ROOT:
    sys.path.insert(0, ROOT)
