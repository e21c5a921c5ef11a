"""Fixtures of the `gpu`-marked partition tests (SM-id probe, results sink)."""

from helpers.gpu import num_sms, results, smid_kernel  # noqa: F401
