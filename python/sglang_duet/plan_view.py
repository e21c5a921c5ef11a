"""``python -m sglang_duet.plan_view PLAN_LOG [-o OUT.png]``: a duet plan log as a timeline.

A plan log is what `--duet-plan-log` (the server) or `python -m sglang_duet.sim --plan-log`
(the simulator) writes: one JSON object per executed iteration (`policy.plan.plan_log_line`).
The picture has four panels over time (seconds from the first line's start):

1. each iteration's mode at its decode SMs (aggregated and decode-only iterations use the whole
   GPU; a spatial one gives decode `sms_decode` SMs and the rest to prefill);
2. the look-ahead decode steps each spatial iteration ran;
3. predicted and measured iteration time (ms; the simulator's "measured" is its simulated time);
4. the queue: decodes in the iteration and, where the log records it, requests waiting for
   prefill.

matplotlib draws it (it comes with the test extras, `pip install matplotlib`), imported only
when drawing. Exit codes: 0 drawn; 2 a missing or malformed log, or no matplotlib.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

__all__ = ["PlanLogError", "draw", "main", "read"]

MODE_COLOURS = {"aggregated": "tab:blue", "decode_only": "tab:green", "spatial": "tab:red"}
_NUMBERS = ("sms_decode", "sms_prefill", "predicted_total_s", "measured_s")


class PlanLogError(ValueError):
    """A plan log that cannot be drawn; the message names the file and line."""


def read(path: str | Path) -> list[dict[str, Any]]:
    """The busy lines (mode other than idle) of a plan log, checked, in order."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise PlanLogError(f"{path}: {e.strerror or e}") from None
    rows = []
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as e:
            raise PlanLogError(f"{path} line {n}: not JSON ({e.msg})") from None
        if not isinstance(row, dict) or "mode" not in row:
            raise PlanLogError(f"{path} line {n}: not a plan-log record (no 'mode')")
        if row["mode"] == "idle":
            continue
        if row["mode"] not in MODE_COLOURS:
            raise PlanLogError(f"{path} line {n}: unknown mode {row['mode']!r}")
        for key in _NUMBERS:
            v = row.get(key)
            if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
                raise PlanLogError(f"{path} line {n}: {key} is {v!r}, not a finite number")
        rows.append(row)
    if not rows:
        raise PlanLogError(f"{path}: no busy iterations to draw")
    return rows


def _times(rows: list[dict[str, Any]]) -> list[float]:
    """Each iteration's start, seconds from the first; without `end_s`, back to back."""
    if all(isinstance(r.get("end_s"), int | float) for r in rows):
        starts = [r["end_s"] - r["measured_s"] for r in rows]
    else:
        starts, t = [], 0.0
        for r in rows:
            starts.append(t)
            t += r["measured_s"]
    return [s - starts[0] for s in starts]


def draw(rows: list[dict[str, Any]], out: str | Path, title: str = "",
         window: tuple[float, float] | None = None) -> int:
    """Draw `rows` into `out` (format from its suffix); `window`: (start, end) seconds of the
    timeline to keep. Returns the number of iterations drawn."""
    try:
        import matplotlib
    except ImportError:
        raise PlanLogError("matplotlib is not installed (pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = _times(rows)
    keep = [i for i, x in enumerate(t) if window is None or window[0] <= x <= window[1]]
    if not keep:
        raise PlanLogError(f"no iteration in the window {window[0]:g}-{window[1]:g} s")
    rows, t = [rows[i] for i in keep], [t[i] for i in keep]
    fig, ax = plt.subplots(4, 1, figsize=(10, 7.5), sharex=True, dpi=90,
                           gridspec_kw={"height_ratios": [1.3, 0.8, 1.2, 1]})
    for mode, colour in MODE_COLOURS.items():
        xs = [x for x, r in zip(t, rows, strict=True) if r["mode"] == mode]
        ys = [r["sms_decode"] for r in rows if r["mode"] == mode]
        if xs:
            ax[0].scatter(xs, ys, s=9, color=colour, label=f"{mode} ({len(xs)})")
    ax[0].set_ylabel("decode SMs")
    ax[0].set_ylim(bottom=0)
    ax[0].legend(fontsize=8, loc="center left", ncol=3, title="mode (iterations)",
                 title_fontsize=8, framealpha=0.9)
    spatial = [(x, r.get("decode_steps") or r.get("lookahead", 1))
               for x, r in zip(t, rows, strict=True) if r["mode"] == "spatial"]
    if spatial:
        ax[1].vlines([x for x, _ in spatial], 0, [k for _, k in spatial], color="tab:red")
    ax[1].set_ylabel("look-ahead\nsteps")
    ax[1].set_ylim(bottom=0)
    ax[2].step(t, [1e3 * r["predicted_total_s"] for r in rows], where="post", lw=0.9,
               label="predicted")
    ax[2].step(t, [1e3 * r["measured_s"] for r in rows], where="post", lw=0.9, ls="--",
               label="measured")
    ax[2].set_ylabel("iteration\ntime (ms)")
    ax[2].set_ylim(bottom=0)
    ax[2].legend(fontsize=8, loc="upper right")
    ax[3].step(t, [len(r.get("decode_rids", ())) for r in rows], where="post", lw=0.9,
               label="decodes in the iteration")
    if all("waiting" in r for r in rows):
        ax[3].step(t, [r["waiting"] for r in rows], where="post", lw=0.9,
                   label="requests waiting for prefill")
    ax[3].set_ylabel("requests")
    ax[3].legend(fontsize=8, loc="upper right")
    ax[3].set_xlabel("time (s)")
    for a in ax:
        a.grid(alpha=0.3)
    ax[0].set_title(title or "duet plan log", fontsize=10)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return len(rows)


def _window(text: str) -> tuple[float, float]:
    try:
        a, b = (float(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected START:END seconds") from None
    if not (math.isfinite(a) and math.isfinite(b) and a < b):
        raise argparse.ArgumentTypeError(f"{text!r}: expected finite START < END")
    return a, b


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sglang_duet.plan_view",
                                 description=(__doc__ or "").split("\n")[0])
    ap.add_argument("plan_log", help="a --duet-plan-log file (e.g. PATH.tp0.dp0)")
    ap.add_argument("-o", "--out", default=None, help="output image (default: PLAN_LOG.png)")
    ap.add_argument("--window", type=_window, default=None, metavar="START:END",
                    help="seconds of the timeline to draw (default: all)")
    ap.add_argument("--title", default="", help="the picture's title")
    args = ap.parse_args(argv)
    out = args.out or f"{args.plan_log}.png"
    try:
        n = draw(read(args.plan_log), out, args.title, args.window)
    except PlanLogError as e:
        print(f"plan_view: error: {e}", file=sys.stderr)
        return 2
    print(f"{out}: {n} iterations")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
