"""Attention-aware roofline latency model (pure Python + numpy; no torch, no SGLang).

Predicts how long one forward iteration of a batch of (q, c) requests takes on a GPU, or on a
partition of its SMs, and how two batches slow each other when they run on disjoint partitions.
"""

from __future__ import annotations

from .batch import Batch, BatchLike, as_batch
from .calibration import Calibration
from .hardware import HARDWARE, HardwareSpec, get_hardware
from .model import MODELS, ModelSpec, get_model
from .predictor import Breakdown, LatencyModel

__all__ = [
    "HARDWARE",
    "MODELS",
    "Batch",
    "BatchLike",
    "Breakdown",
    "Calibration",
    "HardwareSpec",
    "LatencyModel",
    "ModelSpec",
    "as_batch",
    "get_hardware",
    "get_model",
]
