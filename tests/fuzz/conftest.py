import sys
from pathlib import Path

# The fuzz tests import the program generator and checker as modules of this folder.
sys.path.insert(0, str(Path(__file__).parent))
