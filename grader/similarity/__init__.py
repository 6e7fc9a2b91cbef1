"""Academic integrity across a class: code that survives renaming, and the same wrong answers (issue
31).

Evidence for a person to review, never a penalty: nothing here changes a score.
"""

from __future__ import annotations
