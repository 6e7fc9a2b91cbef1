"""The assignment as data: the manifest, the reference solutions, the stubs (``grader build``)."""
