"""Fitting the latency model to measurements: the samples CSV the GPU profiler writes, the
published measurements, and the least-squares fit of a `Calibration` (no torch, no SGLang).

Kept apart from `sglang_duet.latency` because only this offline tool needs it: the policy, the
simulator and the server read a fitted `Calibration`, never fit one.
"""
