"""Serves from the installed carry in the image-like venv: the embedded tiny model on the CPU
through `python -m sglang_duet.launch_server --duet-mode spatial`, a few greedy requests.

Imports show a module loads; this shows the runtime's lazy imports (tokenizer, model loader,
detokenizer; not the grammar backend: `--grammar-backend none`, see spec.UNCARRIED_MODULES) and
the image's package versions (transformers 5.17.0, not the pinned 5.12.1) hold up while
serving. CPU code paths only: the CUDA ones run on the GPU machine.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import requests


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_smoke(py: Path, site: Path, timeout_s: float = 300.0) -> dict:
    """Starts the server with only `site` on the path; returns outputs, timings and errors."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PYTHONPATH=str(site), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               CUDA_VISIBLE_DEVICES="")
    work = Path(tempfile.mkdtemp(prefix="carry-smoke-"))
    model = work / "tiny"
    made = subprocess.run([str(py), "-m", "sglang_duet.tiny_model", str(model)], env=env,
                          capture_output=True, text=True, timeout=300, cwd=work)
    if made.returncode:
        return {"ok": False, "error": "tiny model: " + made.stderr[-1500:]}
    port = _port()
    log = work / "server.log"
    cmd = [str(py), "-m", "sglang_duet.launch_server", "--model-path", str(model),
           "--host", "127.0.0.1", "--port", str(port), "--duet-mode", "spatial",
           # sglang-duet's CPU default, llguidance, is not carried (spec.UNCARRIED_MODULES): on
           # the GPU the grammar backend is SGLang's xgrammar, which cannot run on a CPU
           "--grammar-backend", "none"]
    t0 = time.time()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, cwd=work,
                                start_new_session=True)
    result: dict = {"ok": False, "command": " ".join(cmd[1:])}
    try:
        while time.time() - t0 < timeout_s and proc.poll() is None:
            try:
                if requests.get(f"http://127.0.0.1:{port}/health", timeout=2).ok:
                    break
            except requests.RequestException:
                time.sleep(1.0)
        else:
            result["error"] = "server did not become healthy: " + log.read_text()[-2000:]
            return result
        result["start_s"] = round(time.time() - t0, 1)
        outs = []
        for text in ("def main():", "import os\nimport sys\n", "class Server:"):
            r = requests.post(f"http://127.0.0.1:{port}/generate", timeout=120, json={
                "text": text, "sampling_params": {"max_new_tokens": 8, "temperature": 0,
                                                  "ignore_eos": True}})
            r.raise_for_status()
            outs.append(len(r.json()["output_ids"]))
        result.update(ok=outs == [8, 8, 8], output_lengths=outs)
    except requests.RequestException as e:
        result["error"] = f"{type(e).__name__}: {e}; log: " + log.read_text()[-1500:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    return result
