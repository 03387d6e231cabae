"""``THUNDER_LOGS``: log channels a user turns on from the environment, without editing the program.

``THUNDER_LOGS=recompiles python train.py`` prints one line to stderr for each recompile, saying which
guard failed (core/diagnostics/recompiles.py). The variable holds a comma-separated list of channel
names, so that later channels join the same switch; an unknown name is warned about once.

Each channel writes to its own logger (``thunder.recompiles``) at INFO level. Without the variable the
logger is left to the program's logging setup: silent by default, on with
``logging.getLogger("thunder.recompiles").setLevel(logging.INFO)`` and a handler. With the variable,
thunder gives the logger a handler that prints the bare message to ``sys.stderr`` (looked up at each
message, so a redirected stderr gets it) and stops the records from also reaching the root logger's
handlers, which would print them twice. The variable is read at each message: setting it in a running
program (``os.environ["THUNDER_LOGS"] = "recompiles"``) takes effect at the next recompile.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

__all__ = ["LOG_VARIABLE", "CHANNELS", "enabled_channels", "channel_logger"]

LOG_VARIABLE = "THUNDER_LOGS"
CHANNELS = {"recompiles": "thunder.recompiles"}  # channel name -> logger name

_warned: set[str] = set()
# channel -> (our handler, the logger's level and propagate flag before we set them)
_installed: dict[str, tuple[logging.Handler, int, bool]] = {}


class _StderrHandler(logging.StreamHandler):
    """Prints the bare message to ``sys.stderr`` as it is when the record comes."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(logging.Formatter("%(message)s"))

    @property
    def stream(self):  # noqa: ANN201 - StreamHandler's own attribute
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass


def enabled_channels() -> frozenset[str]:
    """The channels ``THUNDER_LOGS`` names (``"recompiles"``, ``"recompiles,other"``)."""
    value = os.environ.get(LOG_VARIABLE, "")
    names = frozenset(name.strip() for name in value.split(",") if name.strip())
    unknown = sorted(names - CHANNELS.keys())
    if unknown and value not in _warned:
        _warned.add(value)
        warnings.warn(
            f"{LOG_VARIABLE} names unknown log channel(s) {', '.join(unknown)}; "
            f"the channels are: {', '.join(sorted(CHANNELS))}",
            stacklevel=3,
        )
    return names & CHANNELS.keys()


def channel_logger(channel: str) -> logging.Logger:
    """The channel's logger, printing to stderr exactly while ``THUNDER_LOGS`` names the channel."""
    logger = logging.getLogger(CHANNELS[channel])
    enabled = channel in enabled_channels()
    installed = _installed.get(channel)
    if enabled and installed is None:
        handler: logging.Handler = _StderrHandler()
        _installed[channel] = (handler, logger.level, logger.propagate)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    elif not enabled and installed is not None:
        handler, level, propagate = _installed.pop(channel)
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
    return logger
