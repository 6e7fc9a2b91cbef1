"""What runs where students are: ``grader check``, ``grader ci`` and the notebook runtime."""
