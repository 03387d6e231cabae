import sys
from pathlib import Path

# The tests import shared models (tiny_models.py) as a module of this folder.
sys.path.insert(0, str(Path(__file__).parent))
