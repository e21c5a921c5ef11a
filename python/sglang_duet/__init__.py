"""sglang-duet: DuetServe (adaptive SM-level prefill/decode multiplexing) on SGLang."""

__version__ = "0.1.0"
