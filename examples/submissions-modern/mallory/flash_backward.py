"""Attack: os._exit(0) while the module is imported."""
import os

os._exit(0)
