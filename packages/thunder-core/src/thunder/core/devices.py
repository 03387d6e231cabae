"""thunder's devices, printable as ``devices.Device("cuda:0")`` and short as ``cuda:0``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Device", "to_device", "to_torch_device", "cpu"]


@dataclass(frozen=True, eq=False)
class Device:
    """A device type and index. ``Device("cuda")`` means the current CUDA device, as torch does."""

    type: str
    index: int | None = None

    def __init__(self, spec: str | Device | torch.device, index: int | None = None):
        torch_device = torch.device(spec if not isinstance(spec, Device) else str(spec))
        if torch_device.index is None and index is not None:
            torch_device = torch.device(torch_device.type, index)
        if torch_device.type == "cuda" and torch_device.index is None:
            current = torch.cuda.current_device() if torch.cuda.is_available() else 0
            torch_device = torch.device("cuda", current)
        object.__setattr__(self, "type", torch_device.type)
        object.__setattr__(self, "index", torch_device.index)

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f'devices.Device("{self}")'

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (str, torch.device)):
            other = Device(other)
        return isinstance(other, Device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    @property
    def torch_device(self) -> torch.device:
        return torch.device(str(self))


cpu = Device("cpu")


def to_device(x: Any) -> Device:
    if isinstance(x, Device):
        return x
    if isinstance(x, (str, torch.device)):
        return Device(x)
    raise ValueError(f"{x!r} is not a device")


def to_torch_device(x: Any) -> torch.device:
    return x if isinstance(x, torch.device) else to_device(x).torch_device
