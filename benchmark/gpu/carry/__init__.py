"""The carry folder: real SGLang and this project as wheels for the GPU machine (no internet,
Python 3.12, torch 2.11), built and verified on the CPU. `python -m benchmark.gpu.carry --help`."""
