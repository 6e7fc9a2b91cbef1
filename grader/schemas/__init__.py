"""The versioned JSON Schemas (draft 2020-12) of every JSON file the grader reads or writes; loaded by
:mod:`grader.schema`."""
