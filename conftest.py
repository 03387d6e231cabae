"""Settings for every test session of the repository (the packages' tests and tests/).

The on-disk cache of compiled programs (thunder/core/disk_cache.py) stays on in tests, in a folder of
the test run's own: no entry from an earlier run or from the user's ``~/.cache/thunder`` is read and
nothing is left there, while every compile of the suite goes through the cache's key and storage (and
a program compiled by two tests is loaded by the second). Worker processes (pytest-xdist) and the
subprocesses tests start inherit the folder. ``THUNDER_CACHE_DIR`` set by the caller is kept.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

if not os.environ.get("THUNDER_CACHE_DIR"):
    _folder = tempfile.mkdtemp(prefix="thunder-test-cache-")
    os.environ["THUNDER_CACHE_DIR"] = _folder
    atexit.register(shutil.rmtree, _folder, ignore_errors=True)
