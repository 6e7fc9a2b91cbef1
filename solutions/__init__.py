"""Reference solutions of the attention exercise pack (the source of truth for ``exercises/``).

Each module is one exercise. Code between the BEGIN SOLUTION and END SOLUTION markers is removed
by ``grader build``; everything else (signatures, docstrings, shape comments) is what students get.
"""
