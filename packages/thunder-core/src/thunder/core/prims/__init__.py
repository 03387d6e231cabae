"""The primitives: the leaves every torch-language symbol decomposes into, by family.

``core`` holds the strict basics (elementwise, creation, shapes, reductions, matrix products); the
other modules add families built on them. Each prim's gradient rule is written next to it. Traces
print prims as ``prims.<name>``: this package re-exports every family under that one name.
"""

from thunder.core.prims.convolution import *  # noqa: F403
from thunder.core.prims.core import *  # noqa: F403
from thunder.core.prims.creation import *  # noqa: F403
from thunder.core.prims.indexing import *  # noqa: F403
from thunder.core.prims.scans import *  # noqa: F403
from thunder.core.prims.special import *  # noqa: F403
