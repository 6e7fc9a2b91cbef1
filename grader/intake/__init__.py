"""Where a submission enters: a folder, ``.py``, ``.ipynb`` or an archive; class folders, their
layouts and rosters."""
