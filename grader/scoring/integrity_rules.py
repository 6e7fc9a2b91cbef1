"""The integrity scan's rules, as data (read by :mod:`grader.scoring.integrity`).

Each rule has a severity (``withhold``: proof, the exercise is withheld; ``review``: shown to the
instructor as "needs review", costs nothing) and a reason. Imports are an allow-list: a module
nobody listed is a ``module`` finding, not a miss; within allowed modules the few entry points that
reach further are listed by path. The allow-list itself, and which attributes of ``sys`` are plain,
are :mod:`grader.scoring.integrity_modules`.
"""

from __future__ import annotations

WITHHOLD, REVIEW = "withhold", "review"
RULES: dict[str, tuple[str, str]] = {  # rule -> (severity, reason)
    "banned-api": (
        WITHHOLD,
        "names an API banned in this exercise (resolved by binding, its aliases included)",
    ),
    "grader-internals": (
        WITHHOLD,
        "reaches into the grader's own code, which student code has no use for",
    ),
    "module-registry": (
        WITHHOLD,
        "the module registry and import hooks can swap or patch any loaded module, the "
        "grader's too",
    ),
    "frames": (
        WITHHOLD,
        "walks to the callers' frames or the whole object graph, where the grader's own objects are",
    ),
    "function-internals": (
        WITHHOLD,
        "a function's closure, globals or code hold what the grader's bans replaced",
    ),
    "dispatch-modes": (
        WITHHOLD,
        "switches off torch's function or dispatch modes, where the grader's bans and "
        "memory measurement run",
    ),
    "unscannable": (
        WITHHOLD,
        "the file could not be checked (no honest module is that large or that deep)",
    ),
    "dynamic-access": (
        REVIEW,
        "attribute or namespace access with a name known only at run time can reach anything",
    ),
    "builtin-as-value": (
        REVIEW,
        "a dynamic builtin (getattr, eval, ...) passed or stored as a value hides every "
        "later use of it",
    ),
    "dynamic-code": (
        REVIEW,
        "code, imports or names evaluated at run time can hide any other construct",
    ),
    "private-torch": (
        REVIEW,
        "a private torch entry point (torch._C, torch.ops, _-names): unpatched aliases of "
        "the banned APIs live there",
    ),
    "introspection": (REVIEW, "object introspection can reach beyond the student's own objects"),
    "torch-hooks": (REVIEW, "torch function or dispatch hooks run code inside every torch call"),
    "monkeypatch": (
        REVIEW,
        "patches an attribute of a library module or class, which the grader's code uses too",
    ),
    "module": (
        REVIEW,
        "imports a module outside the allow-list of the exercises (they need torch, math and the "
        "standard library's plain data tools)",
    ),
    "files": (
        REVIEW,
        "reads or writes files or the standard streams (the worker's requests arrive on stdin)",
    ),
}
QUALIFIED = {  # dotted paths (and everything below them) -> rule
    **dict.fromkeys(
        (
            "sys.modules",
            "sys.meta_path",
            "sys.path_hooks",
            "sys.path_importer_cache",
            "importlib.sys",
            "types.ModuleType",
        ),
        "module-registry",
    ),
    **dict.fromkeys(
        (
            "sys._getframe",
            "sys._current_frames",
            "sys.settrace",
            "sys.setprofile",
            "sys.call_tracing",
            "sys.addaudithook",
            "sys._current_exceptions",
            "gc.get_objects",
            "gc.get_referrers",
            "gc.get_referents",
            "inspect.currentframe",
            "inspect.stack",
            "inspect.trace",
            "inspect.getouterframes",
            "inspect.getinnerframes",
            "threading.settrace",
            "threading.setprofile",
        ),
        "frames",
    ),
    "inspect.getclosurevars": "function-internals",
    **dict.fromkeys(
        ("operator.attrgetter", "operator.methodcaller", "builtins.__dict__"), "dynamic-access"
    ),
    **dict.fromkeys(
        (
            "typing.get_type_hints",
            "typing.ForwardRef",
            "typing_extensions.get_type_hints",
            "functools.singledispatch",
            "functools.singledispatchmethod",
            "types.FunctionType",
            "types.CodeType",
            "types.LambdaType",
            "torch.load",
            "torch.hub",
            "torch.jit",
            "torch.compile",
            "torch.package",
            "torch.fx",
            "torch.export",
            "torch.utils.cpp_extension",
            "torch.multiprocessing",
            "torch.distributed",
            "torch.utils.data",
        ),
        "dynamic-code",
    ),
    **dict.fromkeys(("types.CellType", "types.FrameType", "types.TracebackType"), "introspection"),
    **dict.fromkeys(("torch.ops", "torch.library", "torch.classes"), "private-torch"),
    "torch.overrides": "torch-hooks",
    **dict.fromkeys(("torch.from_file", "torch.save", "sys.stdin", "sys.__stdin__"), "files"),
}
TORCH_PRIVATE_OK = frozenset(
    {"torch._assert"}
)  # a public function in all but name: it only asserts
DISPATCH_NAMES = frozenset(
    {  # torch's mode stacks: the grader's bans and memory measurement live there
        "_disable_current_modes",
        "_pop_mode",
        "_pop_mode_temporarily",
        "_pop_torch_function_stack",
        "_pop_torch_dispatch_stack",
        "_set_torch_function_mode",
        "_set_dispatch_mode",
        "_unset_dispatch_mode",
        "_get_current_dispatch_mode",
        "_get_current_dispatch_mode_stack",
        "_get_function_stack_at",
        "_len_torch_function_stack",
        "_len_torch_dispatch_stack",
        "_push_on_torch_function_stack",
        "_push_on_torch_dispatch_stack",
        "DisableTorchFunction",
        "DisableTorchFunctionSubclass",
        "_DisableTorchDispatch",
        "_ExcludeDispatchKeyGuard",
        "_ForceDispatchKeyGuard",
        "_dispatch_tls_set_dispatch_key_excluded",
        "_dispatch_tls_set_dispatch_key_included",
        "_RestorePythonTLSSnapshot",
        "_python_dispatch",
        "_disabled_torch_function_impl",
        "_disabled_torch_dispatch_impl",
        "_mode_utils",
    }
)
ATTRIBUTES = {  # attribute names, on any object (literal, or a getattr whose name is known) -> rule
    **dict.fromkeys(
        (
            "__closure__",
            "__globals__",
            "__code__",
            "cell_contents",
            "co_consts",
            "co_code",
            "co_names",
            "__builtins__",
        ),
        "function-internals",
    ),
    **dict.fromkeys(
        (
            "f_back",
            "f_globals",
            "f_locals",
            "f_builtins",
            "f_code",
            "tb_frame",
            "tb_next",
            "gi_frame",
            "cr_frame",
            "ag_frame",
            "gi_code",
            "__subclasses__",
        ),
        "frames",
    ),
    **dict.fromkeys(
        ("__getattribute__", "__getattr__", "__setattr__", "__delattr__", "__dict__"),
        "dynamic-access",
    ),
    **dict.fromkeys(
        ("__import__", "__reduce__", "__reduce_ex__", "__loader__", "__spec__"), "dynamic-code"
    ),
    **dict.fromkeys(("__torch_function__", "__torch_dispatch__"), "torch-hooks"),
}
HARMLESS_DUNDERS = frozenset(
    {
        "__init__",
        "__name__",
        "__qualname__",
        "__doc__",
        "__version__",
        "__class__",
        "__module__",
        "__file__",
        "__len__",
        "__call__",
        "__repr__",
        "__str__",
        "__post_init__",
        "__enter__",
        "__exit__",
        "__iter__",
        "__next__",
        "__getitem__",
        "__setitem__",
        "__contains__",
        "__hash__",
        "__bool__",
        "__float__",
        "__int__",
        "__index__",
        "__new__",
        "__slots__",
        "__all__",
        "__annotations__",
        "__dataclass_fields__",
        "__eq__",
        "__ne__",
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
        "__neg__",
        "__pos__",
        "__abs__",
        "__invert__",
        "__matmul__",
        "__format__",
        *(
            f"__{p}{op}__"
            for op in (
                "add",
                "sub",
                "mul",
                "matmul",
                "truediv",
                "floordiv",
                "mod",
                "pow",
                "and",
                "or",
                "xor",
                "lshift",
                "rshift",
            )
            for p in ("", "r", "i")
        ),
    }
)
CALLS = {  # builtins (resolved by binding) -> rule when called
    **dict.fromkeys(
        ("eval", "exec", "compile", "__import__", "globals", "locals", "breakpoint"), "dynamic-code"
    ),
    "vars": "introspection",
    "open": "files",
    "input": "files",
}
ACCESSORS = frozenset({"__getattribute__", "__getattr__", "__setattr__", "__delattr__"})
IMPORTERS = frozenset({"importlib.import_module", "builtins.__import__"})
ATTRIBUTE_BUILTINS = frozenset({"getattr", "setattr", "delattr"})
VALUE_BUILTINS = frozenset(
    {*CALLS, *ATTRIBUTE_BUILTINS}
)  # a finding wherever one is taken as a value
