"""The static integrity scan: each rule (a positive and look-alikes it spares), names resolved by binding, what a
finding withholds (only `withhold` findings, only their own exercise), banned APIs found by binding, and the
in-process ban stubs' hardening. End-to-end runs in the sandbox: the hostile class (``test_hostile_class.py``);
the corpora of honest styles and evasions: ``test_trust_corpus.py``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from grader import schema
from grader.course import manifest
from grader.inside import bans
from grader.intake import submission as intake
from grader.protocol.errors import BannedAPIError
from grader.scoring import banned, integrity, withhold
from tests.project.support.common import CORPUS, ROOT, solutions_copy

pytestmark = pytest.mark.cost(40)  # seconds on 2 cores: started early (tests/project/conftest.py)

# rule -> (sources that must be flagged with it, look-alike sources that must not be flagged at all)
CASES: dict[str, tuple[list[str], list[str]]] = {
    "grader-internals": (
        [
            "import grader.inside.bans",
            "from grader.protocol import errors",
            "import importlib\nimportlib.import_module('grader.inside')",
            "__import__('grader')",
        ],
        [
            "'''The grader relies on these names.'''",
            "x = 'grader.inside.bans'",
            "from .grader_notes import tips",
            "raise ValueError('the grader. See grader.inside')",
            "# import grader",
        ],
    ),
    "module-registry": (
        [
            "import sys\nsys.modules['x']",
            "from sys import modules",
            "import sys as s\ns.meta_path",
            "import types\ntypes.ModuleType('m')",
        ],
        ["import sys\nsys.maxsize", "modules = [1]\nmodules.append(2)"],
    ),
    "frames": (
        [
            "import sys\nsys._getframe(1)",
            "frame.f_back.f_globals",
            "e.__traceback__.tb_frame",
            "import gc\ngc.get_objects()",
            "import inspect\ninspect.stack()",
            "().__class__.__base__.__subclasses__()",
            "getattr(x, 'f_back')",
        ],
        ["self.frame_count = 1", "x.back", "import sys\nsys.float_info.max"],
    ),
    "function-internals": (
        [
            "f.__closure__",
            "stub.__closure__[0].cell_contents",
            "fn.__globals__['x']",
            "f.__code__",
            "getattr(f, '__closure__')",
            "NAME = '__globals__'\ngetattr(f, NAME)",
        ],
        ["self.closure = 1", "x.globals_count", "x = '__globals__'", "super().__init__()"],
    ),
    "dispatch-modes": (
        [
            "from torch.utils._python_dispatch import _disable_current_modes",
            "import torch as t\nc = t._C\nc._disable_current_modes()",
            "import torch\ntorch._C._pop_torch_function_stack()",
            "import torch\nwith torch._C.DisableTorchFunction():\n    pass",
        ],
        ["import torch\ntorch.no_grad()", "import torch\ntorch.inference_mode()"],
    ),
    "private-torch": (
        [
            "import torch\ntorch._C._nn.gelu(x)",
            "import torch\ntorch.ops.aten.mm(a, b)",
            "import torch\ngetattr(torch, '_C')",
            "import torch\ntorch.library.Library('x', 'DEF')",
            "from torch import _C",
            "import torch.nn.functional as F\nF._canonical_mask",
            "import torch\nNAME = '_C'\ngetattr(torch, NAME)",
        ],
        [
            "import torch\ntorch.nn.functional.scaled_dot_product_attention(q, k, v)",
            "import torch\ntorch.softmax(x, -1)",
            "import torch\ntorch.__version__",
            "self._cache = {}",
            "x._private_of_my_own = 1",
            "import torch\nx = torch.finfo(torch.float32).min",
            "import torch\ntorch._assert(x > 0, 'positive')",
            "m.aten.mm",
            "x = 'torch.ops.aten.mm'",
        ],
    ),
    "dynamic-access": (
        [
            "getattr(obj, name)",
            "setattr(module, name, 1)",
            "delattr(obj, attr_name)",
            "import operator\noperator.attrgetter('a')",
            "from operator import methodcaller",
            "g = getattr\ng(torch, n)",
            "object.__getattribute__(x, n)",
            "x.__dict__",
            "import torch\ngetattr(torch, bytes([95, 67]).decode())",
            "def pick(self, name):\n    return getattr(self, name)",
            "if False:\n    getattr = None\ngetattr(a, n)",
            "x = getattr(a, n)\ngetattr = len",
            "__builtins__['getattr']",
        ],
        [
            "getattr(obj, 'weight')",
            "hasattr(obj, name)",
            "setattr(self, 'W_query', w)",
            "for n in ('W_query', 'W_key'):\n    getattr(self, n)",
            "NAMES = ('a', 'b')\ndef f(self):\n    return [getattr(self, f'W_{n}') for n in NAMES]",
            "object.__setattr__(self, 'scale', 1.0)",
            "def getattr(a, b):\n    return a\ngetattr(x, n)",
        ],
    ),
    "builtin-as-value": (
        [
            "import functools\nfunctools.reduce(getattr, ['_C'], torch)",
            "g = getattr",
            "list(map(getattr, [a], [b]))",
            "run = eval",
            "f(open)",
        ],
        [
            "getattr(a, 'b')",
            "def f(vars):\n    return vars",
            "def f():\n    vars = [1]\n    return vars",
            "vars = [1]\nvars.append(2)",
            "print(len)",
        ],
    ),
    "dynamic-code": (
        [
            "exec('x = 1')",
            "eval(s)",
            "compile(s, 'f', 'exec')",
            "__import__('os')",
            "globals()['x']",
            "locals()",
            "import typing\ntyping.get_type_hints(f)",
            "import torch\ntorch.load('f')",
        ],
        [
            "def f(eval):\n    return eval(1)",
            "def f(compile=None):\n    return compile",
            "evaluate(x)",
            "self.compile_count = 0",
            "model.eval()",
            "x.eval()",
            "def f():\n    eval = lambda s: s\n    return eval('1')",
            "class M:\n    def eval(self):\n        return self.train(False)",
        ],
    ),
    "introspection": (
        ["vars(obj)", "import sys\nsys.exc_info()", "x.__mro__", "type(x).__bases__"],
        ["type(x).__name__", "self.__class__.__name__", "x.__len__()", "vars_ = 1"],
    ),
    "torch-hooks": (
        [
            "class T:\n    def __torch_function__(self, *a):\n        pass",
            "import torch\nclass M(torch.overrides.TorchFunctionMode):\n    pass",
        ],
        ["def torch_function(x):\n    return x"],
    ),
    "monkeypatch": (
        [
            "import torch\ntorch.equal = lambda a, b: True",
            "import torch\ntorch.Tensor.__eq__ = f",
            "import torch.nn.functional as F\nsetattr(F, 'softmax', f)",
            "import torch\ndel torch.softmax",
        ],
        ["self.x = 1", "obj = make()\nobj.attr = 2", "class A:\n    pass\nA.x = 1"],
    ),
    "module": (
        [
            "import os",
            "import codecs",
            "import linecache",
            "import pty",
            "import signal",
            "import atexit",
            "import socket",
            "import subprocess",
            "import threading",
            "import ctypes",
            "import io",
            "import pathlib",
            "import pickle",
            "import inspect",
            "from concurrent.futures import Executor",
            "import importlib",
        ],
        [
            "import math",
            "import torch",
            "from torch import nn",
            "import functools",
            "import dataclasses",
            "from typing import Optional",
            "import itertools",
            "from collections import OrderedDict",
            "import warnings",
            "from . import helper",
            "from .causal_attention import CausalAttention",
        ],
    ),
    "files": (
        [
            "open('/proc/self/mem', 'rb')",
            "import torch\ntorch.from_file('f')",
            "input()",
            "import sys\nsys.stdin.read()",
        ],
        [
            "self.opened = True",
            "x.open_count",
            "def f(open=False):\n    return open",
            "open = 'interval'\nprint(open)",
        ],
    ),
}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_each_rule_flags_its_constructs_and_spares_look_alikes(rule):
    flagged, clean = CASES[rule]
    for source in flagged:
        rules = {f.rule for f in integrity.scan_source(source, "m.py")}
        assert rule in rules, f"{source!r} gave {rules}"
    for source in clean:
        assert integrity.scan_source(source, "m.py") == [], source


def test_every_rule_has_cases_a_severity_and_a_reason():
    assert set(CASES) | {"unscannable", "banned-api"} == set(integrity.RULES)
    assert {
        rule for rule, (severity, _) in integrity.RULES.items() if severity == integrity.WITHHOLD
    } == {
        "banned-api",
        "grader-internals",
        "module-registry",
        "frames",
        "function-internals",
        "dispatch-modes",
        "unscannable",
    }


def test_a_finding_names_file_line_construct_severity_and_reason_sanitised():
    (finding,) = integrity.scan_source(
        "x = 1\nimport sys\nsys.modules['a\\x1b[31m']\n", "evil\u202e.py"
    )
    d = finding.to_dict()
    assert (d["line"], d["construct"], d["rule"], d["severity"]) == (
        3,
        "sys.modules",
        "module-registry",
        "withhold",
    )
    assert (
        d["file"] == "evil\\u202e.py" and "module registry" in d["reason"] and d["exercises"] == []
    )
    (text,) = integrity.scan_source("import sys\nsys.modules['grader.inside\\x1b]0;x']", "m.py")
    assert "\x1b" not in text.to_dict()["construct"]


def test_one_line_with_several_modules_names_each():
    found = integrity.scan_source("import codecs, linecache, pty, signal, atexit, socket", "m.py")
    assert sorted(f.construct.split()[0] for f in found) == [
        "atexit",
        "codecs",
        "linecache",
        "pty",
        "signal",
        "socket",
    ]
    assert {f.severity for f in found} == {"review"}


def test_hostile_and_unscannable_files_do_not_break_the_scan():
    assert integrity.scan_source("def f(:\n", "m.py") == []  # a syntax error fails at import anyway
    (big,) = integrity.scan_source("x = [" + "1," * 210_000 + "]", "m.py")
    assert (big.rule, big.severity) == ("unscannable", "withhold")
    deep = "x = " + "a." * 5000 + "b\n" + "y = " + "(" * 150 + "1" + ")" * 150 + "\n"
    t0 = time.perf_counter()
    assert [
        f.rule
        for f in integrity.scan_source(deep + "import torch\nz = torch" + "._C" * 3000, "m.py")
    ] == ["unscannable"]  # Python's own parser gives up: no honest module is that deep
    found = integrity.scan_source("import torch\nz = torch._C" + ".a" * 400, "m.py")
    assert "private-torch" in {
        f.rule for f in found
    }  # a long chain does not hide its private start
    chain = "import torch\na = torch._C\n" + "".join(
        f"a{i} = a{i - 1 if i else ''}\n" for i in range(60)
    )
    assert integrity.scan_source(chain + "a59._disable_current_modes()", "m.py")
    assert time.perf_counter() - t0 < 5


# -- names resolved by binding ------------------------------------------------------------------
def test_names_resolve_by_scope_as_python_does():
    def rules(source: str) -> set[str]:
        return {f.rule for f in integrity.scan_source(source, "m.py")}

    assert (
        rules("def f(x):\n    def g():\n        return eval(x)\n    eval = 1\n    return g")
        == set()
    )  # enclosing
    assert rules("class C:\n    eval = 1\n    def f(self):\n        return eval('1')") == {
        "dynamic-code"
    }  # class body
    assert rules(
        "def f():\n    global getattr\n    getattr = len\ndef h(a, n):\n    return getattr(a, n)"
    ) == {
        "dynamic-access"
    }  # the global binding is conditional on f running: the builtin stays reachable
    assert (
        rules("getattr = len\ndef h(a, n):\n    return getattr(a, n)") == set()
    )  # definitely rebound first
    assert rules("[getattr(a, n) for getattr in (len,)]") == set()  # a comprehension's own name
    assert (
        rules("from torch import *\nsoftmax(x)") == set()
    )  # star imports: resolved for banned APIs (below)
    assert rules("x: int\neval(s)") == {
        "dynamic-code"
    }  # an annotation alone binds nothing at module level


# -- honest controls: nothing withheld ----------------------------------------------------------
def test_reference_solutions_and_honest_examples_have_no_finding():
    assignment = manifest.load()
    assert withhold.review(ROOT / "solutions", assignment).findings == []
    for name in (
        "alice.zip",
        "bob.tar.gz",
        "carol.zip",
        "dave",
        "frank.py",
    ):  # eve is the hostile one
        taken = intake.take(
            ROOT / "examples" / "submissions" / name,
            modules={e.module for e in assignment.exercises},
        )
        try:
            assert withhold.review(taken.box, assignment, taken.single_module).findings == [], name
        finally:
            taken.cleanup()


NAMES_BANNED = (
    "uses_torch_softmax",
    "flash_calls_sdpa",
    "flash_calls_sdpa_imported",
)  # bugs that call a banned API


@pytest.mark.parametrize(
    "path", sorted((CORPUS / "buggy").rglob("*.py")), ids=lambda p: f"{p.parent.name}/{p.stem}"
)
def test_buggy_corpus_is_not_flagged_except_for_the_banned_apis_it_calls(path):
    assert integrity.scan_source(path.read_bytes(), path.name) == []
    owner = next(a for a in manifest.load_all() if path.parent.name in a.ids())
    module = owner.exercise(path.parent.name).module
    found = banned.findings(
        {module: integrity.parse(path.read_bytes(), f"{module}.py")}, owner, None
    )
    assert {(f.rule, f.exercises) for f in found} == (
        {("banned-api", (path.parent.name,))} if path.stem in NAMES_BANNED else set()
    ), found


# -- what a finding withholds ---------------------------------------------------------------------
def _review(box: Path, single: str | None = None) -> dict[str, str]:
    return withhold.review(box, manifest.load(), single).withheld


def test_a_withhold_finding_costs_only_its_own_exercise_and_a_review_finding_nothing(tmp_path):
    sub = solutions_copy(tmp_path / "sub")
    (sub / "causal_attention.py").write_text(
        (sub / "causal_attention.py").read_text() + "\nimport gc\ngc.get_objects()\n"
    )
    assert set(_review(sub)) == {
        "causal_attention"
    }  # multihead imports causal, but is graded with stand-ins
    (sub / "masks.py").write_text(
        (sub / "masks.py").read_text() + "\nimport os\ndef f(o, n):\n    return getattr(o, n)\n"
    )
    verdict = withhold.review(sub, manifest.load())
    assert set(verdict.withheld) == {"causal_attention"}
    assert {(f.file, f.rule) for f in verdict.needs_review} == {
        ("masks.py", "module"),
        ("masks.py", "dynamic-access"),
        ("causal_attention.py", "module"),
    }


def test_a_helper_module_belongs_to_every_exercise_whose_own_file_imports_it(tmp_path):
    sub = solutions_copy(tmp_path / "sub")
    (sub / "helper.py").write_text("import sys\nTABLE = sys.modules\n")
    (sub / "deeper.py").write_text("from .helper import TABLE\n")
    (sub / "masks.py").write_text((sub / "masks.py").read_text() + "\nfrom .deeper import TABLE\n")
    (sub / "softmax.py").write_text((sub / "softmax.py").read_text() + "\nfrom . import helper\n")
    (sub / "orphan.py").write_text(
        "import sys\nsys.modules.clear()\n"
    )  # imported by nobody: it never runs
    withheld = _review(sub)
    assert set(withheld) == {"masks", "softmax"}
    assert withheld["masks"].startswith(
        "integrity finding: helper.py line 2: sys.modules (module-registry)"
    )


def test_a_single_file_submission_is_every_exercise_s_own_file(tmp_path):
    box = tmp_path / "box"
    box.mkdir()
    (box / "homework.py").write_text("import inspect\ninspect.currentframe().f_back\n")
    assert set(_review(box, "homework")) == set(manifest.load().ids())


# -- banned APIs, by binding, in the code the exercise runs ------------------------------------------
def _with(tmp_path: Path, files: dict[str, str]) -> dict[str, str]:
    sub = solutions_copy(tmp_path / "sub")
    for name, text in files.items():
        (sub / name).write_text(text)
    return _review(sub)


SOFTMAX_OK = "import torch\n\ndef softmax_naive(x, dim=-1):\n    e = torch.exp(x)\n    return e / e.sum(dim, keepdim=True)\n"


@pytest.mark.parametrize(
    "body",
    [
        "import torch.nn.functional as F\ndef softmax_stable(x, dim=-1):\n    return F.softmax(x, dim)",
        "import torch\ndef softmax_stable(x, dim=-1):\n    return x.softmax(dim)",
        "import torch\ndef softmax_stable(x, dim=-1):\n    return torch._C._VariableFunctions.softmax(x, dim)",
        "import torch\ndef softmax_stable(x, dim=-1):\n    return torch.ops.aten._softmax.default(x, dim, False)",
        "import torch\nsm = getattr(torch, 'softmax')\ndef softmax_stable(x, dim=-1):\n    return sm(x, dim)",
        "from torch.nn.modules.activation import Softmax\ndef softmax_stable(x, dim=-1):\n    return Softmax(dim)(x)",
        "from torch import *\ndef softmax_stable(x, dim=-1):\n    return softmax(x, dim)",
        "from .helper import sm\ndef softmax_stable(x, dim=-1):\n    return sm(x, dim)",
    ],
)
def test_a_banned_api_reached_by_any_binding_withholds_its_exercise(tmp_path, body):
    withheld = _with(
        tmp_path,
        {
            "softmax.py": SOFTMAX_OK + body + "\n",
            "helper.py": "import torch\nsm = torch.softmax\nother = 1\n",
        },
    )
    assert set(withheld) == {"softmax"} and "(banned-api)" in withheld["softmax"], withheld


@pytest.mark.parametrize(
    "body",
    [
        "def softmax_stable(x, dim=-1):\n    e = torch.exp(x - x.amax(dim, keepdim=True))\n"
        "    return e / e.sum(dim, keepdim=True)\n"
        "def _self_test():\n    assert torch.allclose(softmax_stable(x), torch.softmax(x, -1))\n"
        "if __name__ == '__main__':\n    print(torch.softmax(torch.zeros(2), 0))",
        "from .helper import other\ndef softmax_stable(x, dim=-1):\n    return softmax_naive(x - x.amax(dim, keepdim=True), dim)",
        "class _K:\n    def softmax(self, x, dim):\n        return softmax_naive(x - x.amax(dim, keepdim=True), dim)\n"
        "    def __call__(self, x, dim):\n        return self.softmax(x, dim)\n"
        "def softmax_stable(x, dim=-1):\n    return _K()(x, dim)",
    ],
)
def test_a_banned_api_that_never_runs_for_the_exercise_costs_nothing(tmp_path, body):
    assert (
        _with(
            tmp_path,
            {
                "softmax.py": SOFTMAX_OK + body + "\n",
                "helper.py": "import torch\nsm = torch.softmax\nother = 1\n",
            },
        )
        == {}
    )


def test_a_scoped_ban_covers_only_its_scope(tmp_path):
    efficient = (ROOT / "solutions" / "efficient_attention.py").read_text()
    assert _with(tmp_path, {}) == {}  # sdpa_attention calls SDPA, where it is allowed
    assert "efficient_attention" in _with(
        tmp_path,
        {
            "efficient_attention.py": efficient.replace(
                "    return out.to(query.dtype)",
                "    return F.scaled_dot_product_attention(query, key, value)",
            )
        },
    )


def test_annotate_zeroes_withheld_points_only_and_the_card_stays_valid(tmp_path):
    from grader.grade import grade

    sub = solutions_copy(tmp_path / "sub")
    (sub / "masks.py").write_text(
        (sub / "masks.py").read_text() + "\nimport sys\nsys.modules.get('torch')\n"
    )
    (sub / "softmax.py").write_text((sub / "softmax.py").read_text() + "\nimport ctypes\n")
    card = grade(sub, isolation="inprocess", seed=3, exercises=["masks", "softmax"])
    schema.validate("scorecard", card)
    by_id = {e["id"]: e for e in card["exercises"]}
    assert by_id["masks"]["score"] == 0 and by_id["masks"]["withheld"].endswith(
        "sys.modules.get (module-registry)"
    )
    assert all(
        t["points"] == 0 and t["message"].startswith("points withheld")
        for t in by_id["masks"]["tests"]
        if t["outcome"] == "passed"
    )
    assert any(
        t["outcome"] == "passed" for t in by_id["masks"]["tests"]
    )  # the tests are still shown
    assert (
        "withheld" not in by_id["softmax"] and card["score"] == by_id["softmax"]["score"] == 6
    )  # review: free
    line = len((sub / "masks.py").read_text().splitlines())
    assert card["integrity"] == [
        {
            "file": "masks.py",
            "line": line,
            "construct": "sys.modules.get",
            "rule": "module-registry",
            "severity": "withhold",
            "reason": integrity.RULES["module-registry"][1],
            "exercises": ["masks"],
        },
        {
            "file": "softmax.py",
            "line": len((sub / "softmax.py").read_text().splitlines()),
            "construct": "ctypes (native code)",
            "rule": "module",
            "severity": "review",
            "reason": integrity.RULES["module"][1],
            "exercises": [],
        },
    ]
    assert (
        card["isolation"]["memory_figure"] == "in-process" and card["timings"]["integrity_s"] >= 0
    )


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
        with pytest.raises(
            BannedAPIError,
            match="is not allowed in this exercise: the point is to write it yourself",
        ):
            stub(*[torch.ones(1, 2, 2)] * 3)
    assert F.scaled_dot_product_attention is not stub and name not in bans._ACTIVE
