"""Settings for every test session of the repository (the packages' tests and tests/).

The on-disk cache of compiled programs (thunder/core/disk_cache.py) is off in tests
(``THUNDER_DISK_CACHE=0``): many tests observe or replace parts of the pipeline (stage timings,
monkeypatched transforms and executors), which a program loaded from the cache skips. The tests of
the cache turn it on, and ``THUNDER_CACHE_DIR`` points at a folder of the test run's own, so that no
test reads or writes the user's ``~/.cache/thunder``. Worker processes (pytest-xdist) and the
subprocesses tests start inherit both. Values set by the caller are kept:
``THUNDER_DISK_CACHE=1 pytest ...`` runs the whole suite through the cache.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("THUNDER_DISK_CACHE", "0")
if not os.environ.get("THUNDER_CACHE_DIR"):
    _folder = tempfile.mkdtemp(prefix="thunder-test-cache-")
    os.environ["THUNDER_CACHE_DIR"] = _folder
    atexit.register(shutil.rmtree, _folder, ignore_errors=True)
