"""Writes legacy_torch_save.pth, the test fixture of PyTorch's legacy (pre-1.6,
non-zip) checkpoint format, as `torch.save(..., _use_new_zipfile_serialization=False)`
writes it:

    bench/.venv/bin/python tests/assets/make_legacy_pth.py tests/assets/legacy_torch_save.pth

Fixed values (no RNG), so the file is the same on every run of the same torch.
"""
import sys
from collections import OrderedDict

import torch

w = (torch.arange(48 * 32, dtype=torch.float32).reshape(48, 32) * 0.37).sin() * 0.05
state = OrderedDict(
    [
        ("conv.weight", w),
        ("conv.bias", torch.linspace(-1, 1, 32)),
        ("head.weight", w[:8].to(torch.float16)),
        ("head.steps", torch.arange(5, dtype=torch.int64)),
        # A view of conv.weight: its storage is written once.
        ("conv.weight_t", w.t()),
    ]
)
torch.save(state, sys.argv[1], _use_new_zipfile_serialization=False)
