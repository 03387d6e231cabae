import os
import sys
from pathlib import Path

import torch

# The tests import shared models (tiny_models.py) as a module of this folder.
sys.path.insert(0, str(Path(__file__).parent))

# Without CUDA, Triton's kernels run in its interpreter; it must be on before any test module runs
# one (the Triton test modules set it at import too, but a module collected before them, such as
# test_error_types.py, can run Triton's kernels first, and the interpreter then refused them).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
