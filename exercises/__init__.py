"""Your exercises: one module per exercise. Run `grader check` or `pytest tests/public`."""
