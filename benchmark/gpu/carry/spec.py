"""What the carry folder holds: the wheel pins, the sglang-kernel trim and the size caps.

The GPU machine (device kinds `nvidia-h100-x1`, most often lent, and `nvidia-h200`) runs Python
3.12 with torch 2.11.0+cu130 and triton 3.6.0 but has no SGLang and no internet; each device
call carries at most 64 MiB of files (the repository's tracked files included).
`image_packages.txt` lists what its image already holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent.parent
IMAGE_PACKAGES = HERE / "image_packages.txt"

MIB = 1 << 20


@dataclass(frozen=True)
class Target:
    """The interpreter and platform the wheels are downloaded for (pip download's flags)."""

    python_version: str = "3.12"
    implementation: str = "cp"
    # glibc 2.39 (the image's Python 3.12.3 is Ubuntu 24.04's); pip matches manylinux_2_N exactly.
    platforms: tuple[str, ...] = (
        *(f"manylinux_2_{n}_x86_64" for n in range(39, 16, -1)),
        "manylinux2014_x86_64", "manylinux1_x86_64",
    )

    def pip_flags(self) -> list[str]:
        flags = ["--only-binary=:all:", "--python-version", self.python_version,
                 "--implementation", self.implementation]
        for p in self.platforms:
            flags += ["--platform", p]
        return flags


# Wheels fetched from PyPI, exact pins. sglang and its kernel package are the project's pins;
# the rest are sglang 0.5.17's requirements that the image lacks and that SGLang's CUDA serving
# path for Qwen3 imports (found by importing that path in a clean image-like environment:
# `python -m benchmark.gpu.carry verify`). Versions are those pip resolved for sglang 0.5.17 in
# the project's own .venv, so the CPU tests and the GPU run use the same code.
PYPI_PINS: tuple[str, ...] = (
    "sglang==0.5.17",
    "sglang-kernel==0.4.5",  # trimmed, see TRIMS
    "flashinfer-python==0.6.15.post1",  # sampler.py imports flashinfer.sampling under is_cuda()
    "apache-tvm-ffi==0.1.11",  # flashinfer's and sglang's JIT op loader
    "fastapi==0.165.0",
    "opentelemetry-api==1.45.2",  # fastapi 0.165's telemetry module imports it
    "starlette==1.10.0",
    "uvicorn==0.54.0",
    "pydantic==2.14.4",
    "pydantic-core==2.50.5",
    "annotated-types==0.8.0",
    "typing-inspection==0.4.5",
    "python-multipart==0.0.34",
    "pyzmq==27.3.0",
    "msgspec==0.23.0",
    "orjson==3.13.0",
    "setproctitle==1.3.8",
    "pybase64==1.5.1",
    "interegular==0.3.3",
    "partial-json-parser==0.2.1.1.post7",
    "xgrammar==0.2.1",
    "openai==2.6.1",
    "jiter==0.19.0",
    "distro==1.9.0",
    "sniffio==1.3.1",
    "compressed-tensors==0.20.1",
    "gguf==0.19.0",
    "openai-harmony==0.0.4",
    "watchfiles==1.3.0",
    "zstandard==0.25.0",
    "torch-memory-saver==0.0.10",
    # sglang 0.5.17 needs its pinned transformers: with the image's 5.17.0 `import sglang.srt.
    # server_args` fails ("'qwen3_asr' is already used by a Transformers config"), seen by
    # verify. 5.12.1 checks tokenizers<=0.23.0 at import (the image has 0.23.2).
    "transformers==5.12.1",  # trimmed, see TRIMS
    "tokenizers==0.22.2",
    # sglang/utils.py imports IPython.display at module level: IPython and what that import
    # loads (its shell's dependencies, jedi, prompt_toolkit, pexpect, ..., are not loaded).
    "ipython==9.18.1",
    "ipython-pygments-lexers==1.1.1",
    "traitlets==5.16.1",
    "loguru==0.7.3",  # compressed-tensors imports it
    "dill==0.4.1",  # sglang/srt/sampling/custom_logit_processor.py (on the model path)
    "datasets==5.2.0",  # sglang/benchmark/datasets (bench_serving) imports it at module level
    "multiprocess==0.70.19",  # datasets imports it
    # serving_chat.py validates tool schemas with jsonschema (module level).
    "jsonschema==4.26.0",
    "jsonschema-specifications==2025.9.1",
    "referencing==0.37.0",
    "rpds-py==2026.9.1",
    # http_server imports openai/realtime/session.py, which imports soundfile (libsndfile
    # bundled) at module level; soundfile loads it through cffi.
    "soundfile==0.13.1",
    "cffi==2.1.1",
    "pycparser==3.12",
)

# Members left out of some wheels, and why. sglang-kernel 0.4.5 is 383 MB (unpacked 1.2 GB, of
# which flash_ops is 1.12 GB): sgl_kernel/__init__.py loads only sm{90,100}/common_ops at import
# (load_utils._load_architecture_specific_ops picks sm90 on compute capability 9.0); flash_ops
# (FA3), flashmla_ops and infllm_ops are loaded by flash_attn.py, flash_mla.py and
# infllm_v2/_loader.py only when those backends are used. The GPU check serves Qwen3 with
# --attention-backend triton and --sampling-backend pytorch, so none is needed; spatial_ops
# (green contexts, SGLang's pdmux) stays.
TRIMS: dict[str, tuple[tuple[str, str], ...]] = {
    "sglang-kernel": (
        ("sgl_kernel/flash_ops.abi3.so", "FA3 (1.12 GB); the check uses the triton backend"),
        ("sgl_kernel/flashmla_ops.abi3.so", "FlashMLA, DeepSeek MLA models only"),
        ("sgl_kernel/infllm_ops.*.so", "InfLLM-V2 sparse attention, MiniCPM models only"),
        ("sgl_kernel/sm100/*", "Blackwell (sm_100) ops; the H100 and H200 are sm_90"),
    ),
    "sglang": (
        ("sglang/srt/server/_core.*.so",
         "the Rust HTTP server, loaded by managers/rust_server.py only with SGLANG_RUST_SERVER"),
        ("sglang/srt/grpc/_core.*.so", "the native gRPC server (--grpc-mode only)"),
        ("sglang/multimodal_gen/*", "the diffusion runtime (sglang generate), not LLM serving"),
        ("sglang/srt/multimodal/_core.*.so",
         "Rust image preprocessing (1.5 MiB), loaded only by multimodal/inkling/"
         "image_processing_rust.py, which processors/inkling.py imports only with "
         "SGLANG_INKLING_RS_MM_PREPROCESS=1 and falls back from on ImportError"),
    ),
    "apache-tvm-ffi": (
        ("tvm_ffi/3rdparty/libbacktrace/*",
         "libbacktrace's C sources and test data (0.6 MiB), compiled into libtvm_ffi.so; the JIT "
         "includes only tvm_ffi/include and 3rdparty/dlpack (libinfo.find_include_path, "
         "find_dlpack_include_path)"),
    ),
    "flashinfer-python": (
        ("flashinfer/data/*", "CUDA/CUTLASS sources for flashinfer's JIT; the check compiles no "
                              "flashinfer kernel (triton attention, pytorch sampling)"),
    ),
    # The model implementations transformers ships are imported lazily, by name; sglang
    # imports these (grep of sglang 0.5.17 for transformers.models.<m>.modeling_*), the rest
    # go. modular_* files are the sources modeling_* are generated from; convert_* are scripts.
    "transformers": (
        ("transformers/models/*/modeling_*.py", "model code sglang does not import"),
        *((f"!transformers/models/{m}/modeling_*.py", "imported by sglang") for m in (
            "auto", "qwen2", "qwen2_5_vl", "qwen3", "qwen3_vl", "qwen2_audio", "pixtral",
            "whisper", "siglip", "mistral", "mistral3", "llava", "llama", "llama4", "vitdet",
            "paligemma", "mllama", "glmasr", "gemma", "gemma2", "clip")),
        ("transformers/models/*/modular_*.py", "sources of the generated modeling files"),
        ("transformers/models/*/convert_*.py", "checkpoint conversion scripts"),
    ),
    "xgrammar": (
        ("xgrammar/lib/*", "libxgrammar.a, a static library for C++ users"),
        ("xgrammar/include/*", "C++ headers for the same"),
    ),
}

# Pins of packages the image also has (carried because the image's version is not usable).
IMAGE_OVERRIDES: tuple[str, ...] = ("transformers", "tokenizers")

# Requirements the image meets at another version than asked, accepted: name -> why.
ACCEPTED_CONFLICTS: dict[str, str] = {}

# Extension modules of carried packages that TRIMS drops: none may be loaded on the serving path
# (imports.py reports any that are; test/benchmark/gpu/test_carry.py checks it in the CPU venv).
DROPPED_MODULES: tuple[str, ...] = (
    "sgl_kernel.flash_ops", "sgl_kernel.flashmla_ops", "sgl_kernel.infllm_ops",
    "sglang.srt.server._core", "sglang.srt.grpc._core", "sglang.srt.multimodal._core",
)
# Packages sglang's metadata asks for that the carry leaves out although a pin existed once, and
# why; imports.py reports them too when loaded. llguidance (2.8 MiB): SGLang imports it only in
# constrained/llguidance_backend.py, which base_grammar_backend.py imports only for
# --grammar-backend llguidance; on CUDA SGLang and sglang-duet use xgrammar (llguidance is
# sglang-duet's CPU default only, sglang_duet/cpu.py), and the carry's CPU smoke serve passes
# --grammar-backend none.
UNCARRIED_MODULES: dict[str, str] = {
    "llguidance": "the --grammar-backend llguidance grammar backend only (2.8 MiB)",
}

# Caps. The brief's cap for the folder, and the device tool's for one call (tree included).
MAX_CARRY_BYTES = 60 * MIB
MAX_CALL_BYTES = 64 * MIB
# The project's own cap for one call: tracked tree + carry wheels, 4 MiB under the device tool's
# limit so that results committed between two builds of the carry do not get the call refused.
# `carry build` records the carry's size in SIZE_RECORD (tracked), so CI, which has no carry,
# checks tree + carry against it (test/benchmark/gpu/test_carry.py), and verify checks the
# built folder against the same cap.
CALL_BUDGET_BYTES = 60 * MIB
SIZE_RECORD = HERE / "carry_size.json"


def spec_fingerprint() -> str:
    """A hash of what decides the carry's content (pins and trims): a size record written for
    another spec is stale."""
    import hashlib
    import json

    text = json.dumps([list(PYPI_PINS), {k: list(v) for k, v in sorted(TRIMS.items())}])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def norm_name(name: str) -> str:
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def image_packages(path: Path = IMAGE_PACKAGES) -> dict[str, str | None]:
    """name -> version seen on the GPU image (None where only the name is known)."""
    out: dict[str, str | None] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, version = line.partition("==")
        out[norm_name(name)] = version or None
    return out


def pin_name(pin: str) -> str:
    return norm_name(pin.split("==", 1)[0])
