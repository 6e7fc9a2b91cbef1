"""The ``grader`` command line only: one module per command family, thin shells over keyword-only
library functions."""
