# sglang-duet: two commands a fresh machine needs (see README.md).
#   make serve [MODEL=path] [ARGS="..."]   start the server (embedded tiny model without MODEL)
#   make test                               run the whole test suite
# Both create .venv and install everything pinned on first use.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# Re-install when any of these change.
STAMP  := $(VENV)/.sglang-duet-installed
DEPS   := pyproject.toml sgl-duet-kernel/pyproject.toml sgl-duet-kernel/CMakeLists.txt \
          $(wildcard sgl-duet-kernel/csrc/*) $(wildcard sgl-duet-kernel/include/*)

.PHONY: venv serve test lint paper capacity clean gpu-carry

venv: $(STAMP)

$(STAMP): $(DEPS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	# pip byte-compiles ~32,000 files on one core; compileall does it on every core (~2x faster)
	$(PY) -m pip install --no-compile -e '.[test]'
	# The kernel package is a CMake/CUDA build; it needs scikit-build-core in the venv.
	$(PY) -m pip install 'scikit-build-core>=0.8'
	$(PY) -m pip install --no-build-isolation ./sgl-duet-kernel
	$(PY) -m compileall -q -j 0 $(VENV)/lib > /dev/null 2>&1 || echo "compileall: some files did not compile (a file that fails is not importable anyway)"
	# SGLang's flags cached for a fast --help (user cache, not the repository)
	$(PY) -m sglang_duet.cli_help --write
	touch $(STAMP)

serve: venv
	HF_HUB_OFFLINE=1 $(PY) -m sglang_duet.launch_server $(if $(MODEL),--model-path $(MODEL)) $(ARGS)

test: venv lint
	HF_HUB_OFFLINE=1 $(PY) -m pytest test -q

lint: venv
	$(PY) -m ruff check python test benchmark

# The carry folder for the GPU machine (benchmark/gpu/README.md): downloads ~500 MB once (cached
# in .gpu-carry-cache), then verifies it in a Python 3.12 venv holding the GPU image's packages
# (.gpu-carry-env, ~5 GB, made once). Not part of `make test`. The build rewrites the tracked
# benchmark/gpu/carry/carry_size.json (the carry's bytes, which CI checks with the tracked tree
# against 60 MiB): commit it when it changes.
gpu-carry: venv
	$(PY) -m benchmark.gpu.carry build .gpu-carry
	$(PY) -m benchmark.gpu.carry verify .gpu-carry
	@git diff --stat -- benchmark/gpu/carry/carry_size.json

paper: venv capacity
	$(PY) -m benchmark.paper

# Capacity (highest QPS with >= 90% of requests meeting both SLOs) per policy, every trace, both
# paper configurations; results, plots and tables in benchmark/results/capacity/.
capacity: venv
	$(PY) -m benchmark.capacity --trace all --quiet
	$(PY) -m benchmark.capacity --trace all --model qwen3-14b --tp 2 --quiet
	$(PY) -m benchmark.capacity.misses
	$(PY) -m benchmark.capacity.max_ttft
	$(PY) -m benchmark.capacity.changing
	$(PY) -m benchmark.capacity.summary

clean:
	rm -rf $(VENV) build dist *.egg-info python/*.egg-info .pytest_cache
