"""torch.autocast around or inside a jitted function is refused with a clear error (core/symbol.py).

Found in an audit: thunder traced without autocast's casts and then ran the program under it, or
traced inside it and ran without it: ``(x @ x.t()).float() + 1`` under CPU bfloat16 autocast gave a
bfloat16 result (eager: float32), and a matmul inside ``with torch.autocast(...)`` stayed float32
(eager: bfloat16). Autocast turned off (transformers' rotary embeddings do that) is fine.
"""

from __future__ import annotations

import pytest
import torch

import thunder


def _around(x):
    return (x @ x.t()).float() + 1


def _inside(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return x @ x


def _turned_off(x):
    with torch.autocast("cpu", enabled=False):
        return x @ x


def test_a_call_under_autocast_is_refused_after_a_call_without() -> None:
    jitted, x = thunder.jit(_around), torch.randn(8, 8)
    torch.testing.assert_close(jitted(x), _around(x))
    with (
        torch.autocast("cpu", dtype=torch.bfloat16),
        pytest.raises(NotImplementedError, match="torch.autocast"),
    ):
        jitted(x)


def test_autocast_inside_is_refused_and_turned_off_is_fine() -> None:
    x = torch.randn(8, 8)
    with pytest.raises(NotImplementedError, match="does not support autocast"):
        thunder.jit(_inside)(x)
    torch.testing.assert_close(thunder.jit(_turned_off)(x), _turned_off(x))
