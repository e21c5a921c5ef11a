"""Turns a check.sh step's log into the answer that step exists for, as a small JSON file the
stage JSON embeds.

    python -m benchmark.gpu.answers phases LOG OUT.json

`phases` (the phases_gpu step, test/runtime/test_phases_gpu.py): does the driver record
primary-context events on green-context streams? The join-probe test prints "phases join:
device events" or "phases join: host sync". Host syncs would keep sglang-duet's own joins
correct, but SGLang's decode replay records a primary-context event on the current (partition)
stream in every replay and torch's pinned-memory copies record one too, so with host syncs
green contexts are unusable: the server must run with --duet-partition-backend none. Exit
status 1 then (the step fails loudly), 0 when events work, 2 when the log says neither (the
test did not run).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

JOIN = re.compile(r"phases join: (device events|host sync)")


def phases_answer(log_text: str) -> dict:
    found = JOIN.findall(log_text)
    if not found:
        return {"join": None, "green_ctx_usable": None,
                "answer": "not answered: the join-probe test did not print its result"}
    join = found[-1]
    if join == "device events":
        return {"join": join, "green_ctx_usable": True,
                "answer": "the driver records primary-context events on green-context streams: "
                          "green-ctx partitions are usable"}
    return {"join": join, "green_ctx_usable": False,
            "answer": "the driver refuses primary-context events on green-context streams: "
                      "SGLang's decode replay records one on the partition stream, so green-ctx "
                      "is unusable here; serve with --duet-partition-backend none"}


def main(argv: list[str] | None = None) -> int:
    a = sys.argv[1:] if argv is None else argv
    if len(a) != 3 or a[0] != "phases":
        print(__doc__, file=sys.stderr)
        return 2
    try:
        text = Path(a[1]).read_text(errors="replace")
    except OSError:
        text = ""
    body = phases_answer(text)
    Path(a[2]).write_text(json.dumps(body, indent=1))
    print(f"[phases] {body['answer']}")
    return {True: 0, False: 1, None: 2}[body["green_ctx_usable"]]


if __name__ == "__main__":
    sys.exit(main())
