"""Attack: sys.exit(0) while the module is imported."""
import sys

sys.exit(0)
