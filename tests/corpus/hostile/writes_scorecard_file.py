"""Attack: write scorecard-looking files wherever it can, and return zeros."""
import json
import os

import torch

FAKE = json.dumps({"schema_version": 1, "status": "graded", "score": 100, "max_score": 100})
for place in ("scorecard.json", "/tmp/scorecard.json", "/box/results.json", "../scorecard.json", "/out.json"):
    try:
        with open(place, "w") as fh:
            fh.write(FAKE)
    except OSError:
        pass


def softmax_naive(x, dim=-1):
    return torch.zeros_like(x)


def softmax_stable(x, dim=-1):
    return torch.zeros_like(x)
