"""The catalogue: per exercise, the misconceptions students have, as
:class:`~grader.testing.diagnosis.Suspects` built on a test's own inputs (trusted code: formulas of
:mod:`grader.testing.variants`, never a student's)."""
