import sys
from pathlib import Path

# The tests import their helper module (docpages.py) from this folder.
sys.path.insert(0, str(Path(__file__).parent))
