"""Lets *stock* `python -m sglang.launch_server` serve on a machine without a CUDA device.

Put this directory on PYTHONPATH (benchmarks and tests do it for the stock baseline only). Every
Python process started with it, SGLang's spawned scheduler included, then applies the same RoPE
patch sglang_duet applies in its own scheduler child (`runtime/patches.py`, patch_rope_for_cpu):
after `sglang.srt.layers.rotary_embedding.base` is imported, its `_is_cpu` flag is set when torch
sees no CUDA device. Nothing else of SGLang changes.
"""

import importlib.abc
import sys

_TARGET = "sglang.srt.layers.rotary_embedding.base"


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module):
            original(module)
            import torch

            if not torch.cuda.is_available() and hasattr(module, "_is_cpu"):
                module._is_cpu = True

        loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _PatchAfterImport())
