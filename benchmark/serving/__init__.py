"""Serving benchmarks: real traces replayed with sglang.bench_serving, stock SGLang vs sglang-duet.

`python -m benchmark.serving --help`; see README.md in this folder.
"""
