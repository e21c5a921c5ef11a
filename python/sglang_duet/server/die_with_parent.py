"""Imported as the fork server's first preload (`server/forkserver.py`), nowhere else.

It asks Linux to SIGKILL this process when its parent, the launcher, exits (PR_SET_PDEATHSIG),
so that a launcher killed during start-up leaves no fork server importing on behind it. The
children forked from the fork server die with it (SGLang sets the same on each). And it ignores
SIGTERM, as the children do (`lifecycle.run_child`): a SIGTERM to the process group starts the
launcher's drain, and a fork server that died of it would take every child with it. (Python's
fork server already ignores SIGINT.) The launcher stops it with the children.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

from sglang_duet.server.forkserver import PARENT_ENV

_PR_SET_PDEATHSIG = 1

signal.signal(signal.SIGTERM, signal.SIG_IGN)
if sys.platform.startswith("linux"):
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if str(os.getppid()) != os.environ.get(PARENT_ENV, str(os.getppid())):
        os._exit(0)  # the launcher was gone before the request took
