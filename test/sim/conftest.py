"""Make ``sim_helpers`` importable (the suite runs with --import-mode=importlib)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
