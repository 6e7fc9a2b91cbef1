"""The static integrity scan (each rule: a positive and a negative example), what a finding withholds,
and the in-process ban stubs' hardening. End-to-end runs in the sandbox: the hostile class (``test_hostile_class.py``)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
import torch

from grader import intake, manifest, schema
from grader.inside import bans
from grader.protocol.errors import BannedAPIError
from grader.scoring import integrity, withhold
from tests.project.conftest import CORPUS, ROOT, solutions_copy

# rule -> (sources that must be flagged with it, look-alike sources that must not be flagged at all)
CASES: dict[str, tuple[list[str], list[str]]] = {
    "grader-internals": (["import grader.inside.bans", "from grader.protocol import errors",
                          "m = sys_mods['grader.inside.bans']", "name = 'grader'"],
                         ["'''The grader relies on these names.'''", "x = 'graders.txt grade'", "import gradio_like"]),
    "module-registry": (["import sys\nsys.modules['x']", "from sys import modules", "import sys as s\ns.meta_path",
                         "import types\ntypes.ModuleType('m')"],
                        ["import sys\nsys.maxsize", "modules = [1]\nmodules.append(2)"]),
    "introspection": (["f.__closure__", "stub.__closure__[0].cell_contents", "import sys\nsys._getframe(1)",
                       "frame.f_back.f_globals", "fn.__globals__['x']", "import gc", "import inspect",
                       "().__class__.__base__.__subclasses__()", "getattr(f, '__closure__')", "x = '__globals__'",
                       "obj.__dict__", "e.__traceback__.tb_frame"],
                      ["self.closure = 1", "x.globals_count", "super().__init__()", "type(x).__name__"]),
    "private-torch": (["import torch\ntorch._C._nn.scaled_dot_product_attention(q, k, v)",
                       "import torch\ntorch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)",
                       "from torch.utils._python_dispatch import _disable_current_modes",
                       "import torch as t\nc = t._C\nc._disable_current_modes()", "import torch\ngetattr(torch, '_C')",
                       "import torch\ntorch.library.Library('x', 'DEF')", "from torch import _C",
                       "import torch.nn.functional as F\nF._canonical_mask", "m.aten.mm", "x = 'torch.ops.aten.mm'"],
                      ["import torch\ntorch.nn.functional.scaled_dot_product_attention(q, k, v)",
                       "import torch\ntorch.softmax(x, -1)", "import torch\ntorch.__version__", "self._cache = {}",
                       "x._private_of_my_own = 1", "import torch\nx = torch.finfo(torch.float32).min"]),
    "dynamic-code": (["exec('x = 1')", "eval(s)", "compile(s, 'f', 'exec')", "__import__('os')", "import importlib",
                      "getattr(obj, name)", "setattr(module, name, 1)", "delattr(obj, attr_name)", "vars(obj)",
                      "globals()['x']", "locals()", "import builtins", "import operator\noperator.attrgetter('a')",
                      "from operator import methodcaller", "import pickle", "import torch\ntorch.load('f')"],
                     ["getattr(obj, 'weight')", "setattr(self, name, value)", "hasattr(obj, name)",
                      "import operator\noperator.add(1, 2)", "evaluate(x)", "self.compile_count = 0"]),
    "native-code": (["import ctypes", "from ctypes import CDLL", "import torch.utils.cpp_extension", "import mmap"],
                    ["import math\nmath.sqrt(2)", "ctypes_like = 1"]),
    "concurrency": (["import threading", "from concurrent.futures import ThreadPoolExecutor", "import os\nos.fork()",
                     "import os\nos.execv('/bin/sh', [])", "import subprocess", "import multiprocessing"],
                    ["import os\nos.path.join('a', 'b')", "threads = 4", "import os\nos.getpid()"]),
    "files": (["open('/proc/self/mem', 'rb')", "import os\nos.open('/proc/self/mem', 0)", "import pathlib",
               "import io"], ["self.opened = True", "x.open_count"]),
}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_each_rule_flags_its_constructs_and_spares_look_alikes(rule):
    flagged, clean = CASES[rule]
    for source in flagged:
        rules = {f.rule for f in integrity.scan_source(source, "m.py")}
        assert rule in rules, f"{source!r} gave {rules}"
    for source in clean:
        assert integrity.scan_source(source, "m.py") == [], source


def test_every_rule_has_cases_and_a_reason():
    assert set(CASES) | {"unscannable"} == set(integrity.REASONS)


def test_a_finding_names_file_line_construct_and_reason_sanitised():
    (finding,) = integrity.scan_source("x = 1\nimport sys\nsys.modules['a\\x1b[31m']\n", "evil\u202e.py")
    d = finding.to_dict()
    assert (d["line"], d["construct"], d["rule"]) == (3, "sys.modules", "module-registry")
    assert d["file"] == "evil\\u202e.py" and "sys.modules" in d["reason"]
    (text,) = integrity.scan_source("x = 'grader.inside\\x1b]0;x'", "m.py")
    assert "\x1b" not in text.to_dict()["construct"]


def test_hostile_and_unscannable_files_do_not_break_the_scan():
    assert integrity.scan_source("def f(:\n", "m.py") == []  # a syntax error fails at import anyway
    assert [f.rule for f in integrity.scan_source("x = [" + "1," * 210_000 + "]", "m.py")] == ["unscannable"]
    deep = "x = " + "a." * 5000 + "b\n" + "y = " + "(" * 150 + "1" + ")" * 150 + "\n"
    t0 = time.perf_counter()
    assert integrity.scan_source(deep + "import torch\nz = torch" + "._C" * 3000, "m.py")
    assert time.perf_counter() - t0 < 5


# -- honest controls: nothing flagged, nothing withheld -------------------------------------------
def _honest_boxes(tmp_path: Path) -> list[Path]:
    modules = {e.module for e in manifest.load().exercises}
    boxes = [ROOT / "solutions"]
    for name in ("alice.zip", "bob.tar.gz", "carol.zip", "dave", "frank.py"):  # eve is the hostile one
        boxes.append(intake.take(ROOT / "examples" / "submissions" / name, modules=modules).box)
    return boxes


def test_reference_solutions_and_honest_examples_are_not_flagged(tmp_path):
    assignment = manifest.load()
    for box in _honest_boxes(tmp_path):
        assert integrity.scan_box(box) == [], box
        assert withhold.review(box, assignment).withheld == {}, box


@pytest.mark.parametrize("path", sorted((CORPUS / "buggy").rglob("*.py")), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_buggy_corpus_is_not_flagged(path):
    assert integrity.scan_source(path.read_bytes(), path.name) == []


INTEGRITY = CORPUS / "hostile" / "integrity"
TRICKS = {"bans_cleared_via_sys_modules": "module-registry", "ban_stub_closure": "introspection",
          "unpatched_alias_torch_c": "private-torch", "unpatched_alias_aten_op": "private-torch",
          "disables_dispatch_mode": "private-torch"}


@pytest.mark.parametrize("trick", sorted(TRICKS))
def test_each_red_team_trick_is_flagged(trick):
    rules = {f.rule for f in integrity.scan_source((INTEGRITY / f"{trick}.py").read_bytes(), f"{trick}.py")}
    assert TRICKS[trick] in rules, rules


# -- what a finding withholds ---------------------------------------------------------------------
def _review(box: Path, single: str | None = None) -> dict[str, str]:
    return withhold.review(box, manifest.load(), single).withheld


def test_a_finding_withholds_its_exercise_and_every_exercise_importing_it(tmp_path):
    sub = solutions_copy(tmp_path / "sub")
    (sub / "causal_attention.py").write_text((sub / "causal_attention.py").read_text() + "\nimport gc\n")
    assert set(_review(sub)) == {"causal_attention", "multihead_attention"}  # multihead imports causal
    (sub / "helper.py").write_text("import sys\nTABLE = sys.modules\n")
    (sub / "masks.py").write_text((sub / "masks.py").read_text() + "\nfrom .helper import TABLE\n")
    withheld = _review(sub)
    assert set(withheld) == {"causal_attention", "multihead_attention", "masks"}
    assert withheld["masks"].startswith("integrity finding: helper.py line 2: sys.modules (module-registry)")


def test_a_single_file_submission_is_withheld_as_a_whole(tmp_path):
    box = tmp_path / "box"
    box.mkdir()
    (box / "homework.py").write_text("import inspect\n")
    assert set(_review(box, "homework")) == set(manifest.load().ids())


def test_once_bans_are_void_a_clean_module_naming_its_banned_api_is_withheld_too(tmp_path):
    """A tampering softmax.py clears the worker's bans for every module: the static check takes over."""
    sub = solutions_copy(tmp_path / "sub")
    shutil.copy(INTEGRITY / "bans_cleared_via_sys_modules.py", sub / "softmax.py")
    (sub / "scaled_dot_product.py").write_text(
        "import torch.nn.functional as F\n\ndef scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0, "
        "scale=None, training=False):\n    return F.scaled_dot_product_attention(q, k, v), None\n")
    efficient = (sub / "efficient_attention.py").read_text()
    withheld = _review(sub)
    assert set(withheld) == {"softmax", "scaled_dot_product"}, withheld  # efficient: SDPA only in sdpa_attention
    assert withheld["scaled_dot_product"].startswith("uses torch.nn.functional.scaled_dot_product_attention")
    (sub / "efficient_attention.py").write_text(efficient.replace(
        "    return out.to(query.dtype)", "    return F.scaled_dot_product_attention(query, key, value)"))
    assert "efficient_attention" in _review(sub)  # inside flash_attention, where it is banned
    (sub / "softmax.py").write_text("def softmax_naive(x, dim=-1):\n    return x.softmax(dim)\n")
    assert _review(sub) == {}  # no finding: the worker's bans hold, the tests fail as usual


def test_annotate_zeroes_points_and_the_card_stays_valid(tmp_path):
    from grader.grade import grade

    sub = solutions_copy(tmp_path / "sub")
    (sub / "masks.py").write_text((sub / "masks.py").read_text() + "\nimport ctypes\n")
    card = grade(sub, isolation="inprocess", seed=3, exercises=["masks", "softmax"])
    schema.validate("scorecard", card)
    by_id = {e["id"]: e for e in card["exercises"]}
    assert by_id["masks"]["score"] == 0 and by_id["masks"]["withheld"].endswith("ctypes (native-code)")
    assert all(t["points"] == 0 and t["message"].startswith("points withheld") for t in by_id["masks"]["tests"]
               if t["outcome"] == "passed")
    assert any(t["outcome"] == "passed" for t in by_id["masks"]["tests"])  # the tests are still shown
    assert "withheld" not in by_id["softmax"] and card["score"] == by_id["softmax"]["score"] == 6
    assert card["integrity"] == [{"file": "masks.py", "line": len((sub / "masks.py").read_text().splitlines()),
                                  "construct": "ctypes", "rule": "native-code",
                                  "reason": integrity.REASONS["native-code"]}]
    assert card["isolation"]["memory_figure"] == "in-process" and card["timings"]["integrity_s"] >= 0


# -- the in-process stubs: defence in depth -------------------------------------------------------
def test_ban_stub_keeps_no_original_in_reach_and_the_table_cannot_be_cleared():
    import torch.nn.functional as F

    name = "torch.nn.functional.scaled_dot_product_attention"
    with bans.banned([name]):
        stub = F.scaled_dot_product_attention
        cells = [c.cell_contents for c in stub.__closure__ or ()]
        assert cells == [name]  # only the name: no callable way around the ban
        with pytest.raises(AttributeError):
            bans._ACTIVE.clear()  # type: ignore[attr-defined]
        with pytest.raises(BannedAPIError, match="is not allowed in this exercise: the point is to write it yourself"):
            stub(*[torch.ones(1, 2, 2)] * 3)
    assert F.scaled_dot_product_attention is not stub and name not in bans._ACTIVE
