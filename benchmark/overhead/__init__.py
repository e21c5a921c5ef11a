"""Issue 2's overhead benchmark: stock SGLang vs sglang-duet (aggregated) on one schedule.

`python -m benchmark.overhead --help`
"""
