"""Static tripwires: what a submission may not do, flagged with its line before anything runs.

A submission is one Python file whose ``kernel(...)`` launches its own Triton or CUDA kernels. Nothing it needs
requires threads, streams, subprocesses, files, the environment, frame introspection, dynamic code or rebinding
attributes of torch/triton/the harness, so each of those is a ``reject`` flag here (``static.<rule>``). Calling
the task's own PyTorch op (``Task.forbidden_ops``) outside Triton kernels is ``static.forbidden_op``.

This is the first of several layers, not the whole defence: Python can always hide a call from an AST walk, so
the worker also snapshots the harness, counts threads, checks every output and profiles the call
(``runner/worker.py``). The walk only reads the source (:mod:`ast`); it never imports or runs it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from d2kgrade.records import Flag

# Modules whose attributes a submission may never rebind (monkeypatching), by top-level name.
PROTECTED_ROOTS = frozenset({"torch", "triton", "runner", "d2kgrade", "builtins", "sys", "os", "time", "numpy",
                             "math", "functools", "operator", "importlib", "types", "io", "random"})

# Imports that are a rule break by themselves, with the rule they break.
BANNED_IMPORTS: dict[str, str] = {
    "threading": "thread", "_thread": "thread", "concurrent": "thread", "multiprocessing": "thread",
    "asyncio": "thread", "subprocess": "subprocess", "pty": "subprocess", "pexpect": "subprocess",
    "signal": "process_exit", "inspect": "frame_walk", "gc": "frame_walk", "traceback": "frame_walk",
    "ctypes": "dynamic_code", "cffi": "dynamic_code", "mmap": "dynamic_code", "importlib": "dynamic_code",
    "builtins": "monkeypatch", "runpy": "dynamic_code", "code": "dynamic_code", "codeop": "dynamic_code",
    "pickle": "dynamic_code", "marshal": "dynamic_code", "dill": "dynamic_code", "cloudpickle": "dynamic_code",
    "socket": "network", "urllib": "network", "http": "network", "requests": "network", "ftplib": "network",
    "shutil": "file_access", "tempfile": "file_access", "glob": "file_access", "fcntl": "file_access",
    "runner": "harness_import", "d2kgrade": "harness_import", "tasks": "harness_import",
    "references": "harness_import", "atexit": "process_exit", "weakref": "frame_walk", "resource": "subprocess",
}

# Calls (resolved dotted names) that break a rule.
BANNED_CALLS: dict[str, str] = {
    "os.system": "subprocess", "os.popen": "subprocess", "os.fork": "subprocess", "os.forkpty": "subprocess",
    "os.posix_spawn": "subprocess", "os.posix_spawnp": "subprocess", "os.startfile": "subprocess",
    "os._exit": "process_exit", "os.abort": "process_exit", "os.kill": "process_exit", "os.killpg": "process_exit",
    "os.setsid": "process_exit", "os.setpgid": "process_exit",
    "sys._getframe": "frame_walk", "sys._current_frames": "frame_walk", "sys.settrace": "frame_walk",
    "sys.setprofile": "frame_walk", "sys.exc_info": "frame_walk", "sys.exception": "frame_walk",
    "sys.addaudithook": "frame_walk", "sys.setrecursionlimit": "monkeypatch",
    "os.getenv": "env_access", "os.getenvb": "env_access", "os.putenv": "env_access", "os.unsetenv": "env_access",
    "os.open": "file_access", "os.fdopen": "file_access", "os.write": "file_access", "os.read": "file_access",
    "os.dup": "file_access", "os.dup2": "file_access", "os.close": "file_access", "os.closerange": "file_access",
    "os.pipe": "file_access", "os.remove": "file_access",
    "os.unlink": "file_access", "os.rename": "file_access", "os.replace": "file_access", "os.listdir": "file_access",
    "os.scandir": "file_access", "os.walk": "file_access", "os.chdir": "file_access", "os.makedirs": "file_access",
    "os.mkdir": "file_access", "os.symlink": "file_access", "os.chmod": "file_access", "os.truncate": "file_access",
    "io.open": "file_access", "io.FileIO": "file_access", "open": "file_access",
    "eval": "dynamic_code", "exec": "dynamic_code", "compile": "dynamic_code", "__import__": "dynamic_code",
    "globals": "frame_walk", "locals": "frame_walk", "vars": "frame_walk",
    "setattr": "monkeypatch", "delattr": "monkeypatch",
    "torch.cuda.Stream": "stream", "torch.cuda.stream": "stream", "torch.cuda.ExternalStream": "stream",
    "torch.cuda.set_stream": "stream", "torch.Stream": "stream", "torch.cuda.StreamContext": "stream",
    "torch.cuda.streams.Stream": "stream", "torch.cuda.current_stream().wait_stream": "stream",
    "torch.ops.load_library": "dynamic_code", "torch.utils.cpp_extension.load": "dynamic_code",
    "torch.classes.load_library": "dynamic_code", "torch.cuda.set_per_process_memory_fraction": "monkeypatch",
    "torch.set_default_device": "monkeypatch", "torch.set_default_dtype": "monkeypatch",
    "torch.manual_seed": "monkeypatch", "torch.cuda.manual_seed": "monkeypatch", "torch.use_deterministic_algorithms":
    "monkeypatch", "torch.set_grad_enabled": "monkeypatch", "torch.overrides.enable_reentrant_dispatch": "monkeypatch",
}

# Names whose mere use (any attribute or name reference) is a rule break.
BANNED_PREFIXES: dict[str, str] = {
    "torch.library": "monkeypatch", "torch._C": "monkeypatch", "torch.overrides": "monkeypatch",
    "torch.utils._python_dispatch": "monkeypatch", "torch._dynamo": "monkeypatch", "torch._inductor": "monkeypatch",
    "torch.fx": "monkeypatch", "torch._subclasses": "tensor_subclass", "torch.testing": "harness_import",
    "torch.cuda.memory": "monkeypatch", "triton.testing": "harness_import", "os.environ": "env_access",
    "os.environb": "env_access", "sys.modules": "monkeypatch", "sys.meta_path": "monkeypatch",
    "sys.path_hooks": "monkeypatch", "sys.stdout": "file_access", "sys.stderr": "file_access",
    "sys.stdin": "file_access", "sys.__stdout__": "file_access", "triton.runtime.interpreter": "monkeypatch",
    "triton.knobs": "monkeypatch", "triton.runtime.driver": "monkeypatch",
    # A kernel that can tell when it is profiled or timed could behave only then.
    "torch.profiler": "harness_import", "torch.autograd.profiler": "harness_import", "torch.cuda.Event": "monkeypatch",
    "torch.cuda.memory_snapshot": "monkeypatch", "torch.cuda.memory_stats": "monkeypatch",
    "torch.jit.fork": "thread", "torch.futures": "thread",
}

# Attribute names that reach frames, code, globals or class internals.
FRAME_ATTRS = frozenset({
    "f_back", "f_locals", "f_globals", "f_code", "f_builtins", "tb_frame", "tb_next", "gi_frame", "cr_frame",
    "ag_frame", "__traceback__", "__globals__", "__closure__", "__code__", "__subclasses__", "__builtins__",
    "__dict__", "__self__", "__func__", "__wrapped__", "__defaults__", "__kwdefaults__", "__getattribute__",
    "__setattr__", "__delattr__", "__reduce__", "__reduce_ex__", "__bases__", "__mro__", "__loader__", "__spec__",
})

# Methods defined on a class that intercept torch or tensor semantics.
INTERCEPT_METHODS = frozenset({"__torch_function__", "__torch_dispatch__", "__del__", "__array__",
                               "__array_interface__", "__cuda_array_interface__", "__dlpack__", "__index__"})

# Read-only device queries of Triton's driver that launchers make (the tutorials size persistent grids from the SM
# count); everything else under triton.runtime.driver (set_active, the launcher, the benchmarker) stays banned.
DRIVER_QUERIES = frozenset({
    "triton.runtime.driver.active.utils.get_device_properties", "triton.runtime.driver.active.get_current_device",
    "triton.runtime.driver.active.get_current_target", "triton.runtime.driver.active.get_active_torch_device",
})

# torch classes a launcher may subclass: they intercept nothing (Liger wraps every kernel in an autograd.Function,
# vLLM's layers are nn.Modules); interception hooks defined on any class are flagged on their own.
SAFE_TORCH_BASES = frozenset({"torch.autograd.Function", "torch.autograd.function.Function", "torch.nn.Module",
                              "torch.nn.modules.module.Module"})

# Environment variables a submission may read by a constant name (to pick the interpreter path, say).
ENV_READ_OK = re.compile(r"^(TRITON_|CUDA_|TORCH_|PYTORCH_)")

# Calls that read one environment variable by name.
ENV_READERS = frozenset({"os.getenv", "os.environ.get", "os.environ.__getitem__", "os.getenvb", "os.environb.get"})

# File paths that hold secrets or let a process reach into itself.
SECRET_PATH = re.compile(r"/proc/|\.aws|\.ssh|\.netrc|\.docker|\.kube|gcloud|\.config/|credentials|\.git-credentials|"
                         r"\.pypirc|/etc/passwd|/etc/shadow|\.bash_history|/dev/(mem|nvidia)", re.I)

# CUDA C++ (in load_inline strings) that breaks the same rules.
CUDA_RULES: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"\bcudaStreamCreate\w*|\bgetStreamFromPool\b|\bcudaLaunchHostFunc\b|\bcudaStreamAddCallback\b|"
                r"\bcuStreamCreate\w*"), "stream", "creates a CUDA stream or host callback"),
    (re.compile(r"\bstd::thread\b|\bpthread_create\b|\bstd::async\b|\bstd::jthread\b|#\s*pragma\s+omp\b"),
     "thread", "starts a host thread"),
    (re.compile(r"\b(system|popen|fork|vfork|execv\w*|execl\w*|posix_spawn\w*)\s*\("), "subprocess",
     "starts a process"),
    (re.compile(r"\b(getenv|secure_getenv|environ)\b"), "env_access", "reads the environment"),
    (re.compile(r"\b_exit\s*\(|\bquick_exit\b|\babort\s*\(|\bkill\s*\(|\braise\s*\(\s*SIG"), "process_exit",
     "ends or signals the process"),
    (re.compile(r"\b(fopen|open|creat|unlink|dlopen|mmap)\s*\("), "file_access", "opens files or libraries"),
    (re.compile(r"\bcublas\w*|\bcudnn\w*|\bat::(matmul|mm|bmm|addmm|linear|softmax|_softmax|einsum)\b|"
                r"\btorch::(matmul|mm|bmm|addmm|linear|softmax|einsum)\b"), "library_call",
     "calls a library kernel (cuBLAS/cuDNN/ATen op) from C++"),
]

RULE_TEXT = {
    "thread": "threads are not allowed (work hidden on a thread escapes the timer)",
    "subprocess": "starting processes is not allowed",
    "process_exit": "ending, signalling or detaching the process is not allowed",
    "stream": "creating or switching CUDA streams is not allowed (work on a side stream escapes the timer)",
    "monkeypatch": "rebinding or intercepting torch, triton, the harness or the interpreter is not allowed",
    "frame_walk": "frame, code and namespace introspection is not allowed",
    "dynamic_code": "dynamic code, native libraries and loaders are not allowed",
    "env_access": "reading or writing the environment is not allowed (except TRITON_/CUDA_/TORCH_ names)",
    "file_access": "file and descriptor access is not allowed",
    "network": "network access is not allowed",
    "harness_import": "importing the harness, the suite or test utilities is not allowed",
    "tensor_subclass": "tensor subclasses and torch interception hooks are not allowed",
    "forbidden_op": "this task's own PyTorch op may not do the work",
    "library_call": "library kernels may not do the work",
    "secret_path": "paths to secrets or to the process itself are not allowed",
}


@dataclass
class _Scope:
    aliases: dict[str, str] = field(default_factory=dict)
    """Local name -> dotted name it stands for (``F`` -> ``torch.nn.functional``)."""


def _decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    out = []
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        parts = []
        while isinstance(target, ast.Attribute):
            parts.append(target.attr)
            target = target.value
        if isinstance(target, ast.Name):
            parts.append(target.id)
        out.append(".".join(reversed(parts)))
    return out


def _is_triton_jit(node: ast.AST) -> bool:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    return any(n.split(".")[-1] in ("jit", "autotune", "heuristics") for n in _decorator_names(node))


class _Walker(ast.NodeVisitor):
    def __init__(self, forbidden_ops: Iterable[str]) -> None:
        self.flags: list[Flag] = []
        self.aliases: dict[str, str] = {}
        """Local name -> the dotted name it was bound to by an import or by ``T = torch.Tensor``."""
        self.in_jit = 0
        forbidden = list(forbidden_ops)
        self.forbidden_dotted = {f for f in forbidden if not f.startswith("Tensor.") and f != "@"}
        self.forbidden_methods = {f.split(".", 1)[1] for f in forbidden if f.startswith("Tensor.")}
        self.forbid_matmul = "@" in forbidden
        self._seen: set[tuple[str, int, str]] = set()
        self.docstrings: list[ast.Constant] = []
        """Docstrings: prose (a reference's figure table names cuBLAS), read as C++ only where the file reads __doc__
        or the docstring holds one of :data:`CPP_MARKERS` (:func:`scan`)."""
        self.reads_doc = False

    # ----------------------------------------------------------------------------------------- helpers

    def flag(self, rule: str, node: ast.AST, what: str) -> None:
        line = getattr(node, "lineno", None)
        key = (rule, line or 0, "")  # one flag per rule and line
        if key in self._seen:
            return
        self._seen.add(key)
        self.flags.append(Flag(code=f"static.{rule}", message=f"line {line}: {what}: {RULE_TEXT[rule]}", line=line))

    def resolve(self, node: ast.AST) -> str | None:
        """Dotted name of an attribute chain rooted at an imported name (``F.softmax`` ->
        ``torch.nn.functional.softmax``); None when the root is a local value, not a module or alias."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Call):
            inner = self.resolve(node.func)
            return ".".join([inner + "()", *reversed(parts)]) if inner else None
        if not isinstance(node, ast.Name) or node.id not in self.aliases:
            return None
        return ".".join([self.aliases[node.id], *reversed(parts)])

    @staticmethod
    def _protected(dotted: str | None) -> bool:
        return dotted is not None and dotted.split(".")[0] in PROTECTED_ROOTS

    def _check_dotted(self, dotted: str, node: ast.AST, importing: bool = False) -> None:
        if dotted.split("()", 1)[0] in DRIVER_QUERIES or (importing and dotted == "triton.runtime.driver"):
            return  # a read-only device query (its other uses are still checked where they happen)
        for prefix, rule in BANNED_PREFIXES.items():
            if dotted == prefix or dotted.startswith(prefix + "."):
                self.flag(rule, node, f"uses {dotted}")
                return

    # ----------------------------------------------------------------------------------------- imports

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            root = a.name.split(".")[0]
            if root in BANNED_IMPORTS:
                self.flag(BANNED_IMPORTS[root], node, f"imports {a.name}")
            self._check_dotted(a.name, node)
            if a.asname:
                self.aliases[a.asname] = a.name
            else:
                self.aliases[root] = root

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.flag("harness_import", node, "relative import")
            return
        mod = node.module or ""
        root = mod.split(".")[0]
        if root in BANNED_IMPORTS:
            self.flag(BANNED_IMPORTS[root], node, f"imports from {mod}")
        for a in node.names:
            full = f"{mod}.{a.name}"
            if a.name == "*":
                self.flag("monkeypatch", node, f"star import from {mod}")
                continue
            if full in BANNED_CALLS:
                self.flag(BANNED_CALLS[full], node, f"imports {full}")
            self._check_dotted(full, node, importing=True)
            self.aliases[a.asname or a.name] = full

    # ----------------------------------------------------------------------------------------- definitions

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._visit_def(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self.flag("thread", node, f"async function {node.name}")
        self._visit_def(node)

    def _visit_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name in INTERCEPT_METHODS:
            self.flag("tensor_subclass", node, f"defines {node.name}")
        jit = _is_triton_jit(node)
        self.in_jit += jit
        self.generic_visit(node)
        self.in_jit -= jit

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            dotted = self.resolve(base)
            if dotted and dotted.split(".")[0] == "torch" and dotted not in SAFE_TORCH_BASES:
                self.flag("tensor_subclass", node, f"class {node.name} subclasses {dotted}")
        for kw in node.keywords:
            if kw.arg == "metaclass":
                self.flag("monkeypatch", node, f"class {node.name} sets a metaclass")
        self.generic_visit(node)

    # ----------------------------------------------------------------------------------------- statements

    def _check_target(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._check_target(elt, node)
        elif isinstance(target, ast.Starred):
            self._check_target(target.value, node)
        elif isinstance(target, ast.Attribute):
            base = self.resolve(target.value)
            if self._protected(base):
                self.flag("monkeypatch", node, f"assigns {base}.{target.attr}")
            elif target.attr.startswith("__") and target.attr.endswith("__"):
                self.flag("monkeypatch", node, f"assigns attribute {target.attr}")
        elif isinstance(target, ast.Subscript):
            base = self.resolve(target.value)
            if self._protected(base):
                self.flag("monkeypatch", node, f"assigns an item of {base}")
        elif isinstance(target, ast.Name) and target.id in ("__builtins__", "__import__", "__class__"):
            self.flag("monkeypatch", node, f"rebinds {target.id}")

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_target(t, node)
        # `T = torch.Tensor` makes T an alias, so `T.add = f` is caught too.
        dotted = self.resolve(node.value)
        for t in node.targets:
            if isinstance(t, ast.Name):
                if self._protected(dotted) and "()" not in (dotted or ""):
                    self.aliases[t.id] = dotted  # type: ignore[assignment]
                else:
                    self.aliases.pop(t.id, None)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._check_target(t, node)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        for name in node.names:
            if name in ("__builtins__", "__import__"):
                self.flag("monkeypatch", node, f"global {name}")

    # ----------------------------------------------------------------------------------------- expressions

    def visit_Name(self, node: ast.Name) -> None:
        self.reads_doc |= node.id == "__doc__"
        if node.id in FRAME_ATTRS:
            self.flag("frame_walk", node, f"uses {node.id}")
        if node.id in self.aliases:
            self._check_dotted(self.aliases[node.id], node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.reads_doc |= node.attr == "__doc__"
        if node.attr in FRAME_ATTRS:
            self.flag("frame_walk", node, f"reads .{node.attr}")
        dotted = self.resolve(node)
        if dotted:
            self._check_dotted(dotted, node)
            if BANNED_CALLS.get(dotted) in ("process_exit", "frame_walk", "subprocess"):
                self.flag(BANNED_CALLS[dotted], node, f"uses {dotted}")
            if not self.in_jit and dotted in self.forbidden_dotted:
                self.flag("forbidden_op", node, f"uses {dotted}")
            # The chain is resolved as a whole; its plain-name prefixes are not separate uses, but a call inside
            # it is (``torch.gather(...).contiguous()``: the gather is checked as any call).
            inner: ast.AST = node.value
            while isinstance(inner, ast.Attribute):
                inner = inner.value
            if isinstance(inner, ast.Call):
                self.visit(inner)
            return
        if not self.in_jit and node.attr in self.forbidden_methods:
            self.flag("forbidden_op", node, f"uses the tensor method .{node.attr}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id not in self.aliases:
            name = func.id  # a builtin, or a local function
            if name in BANNED_CALLS:
                self.flag(BANNED_CALLS[name], node, f"calls {name}()")
            if name in ("getattr", "hasattr"):
                if len(node.args) < 2 or not isinstance(node.args[1], ast.Constant):
                    self.flag("dynamic_code", node, f"{name}() with a computed attribute name")
                elif isinstance(node.args[1].value, str) and node.args[1].value in FRAME_ATTRS:
                    self.flag("frame_walk", node, f"{name}(..., {node.args[1].value!r})")
                else:
                    self.reads_doc |= node.args[1].value == "__doc__"
        else:
            dotted = self.resolve(func)
            if dotted in ENV_READERS:
                if not self._env_read_ok(node):
                    self.flag("env_access", node, f"calls {dotted}()")
                self._visit_args(node)
                return
            if dotted:
                rule = BANNED_CALLS.get(dotted)
                if rule:
                    self.flag(rule, node, f"calls {dotted}()")
                if not self.in_jit and dotted in self.forbidden_dotted:
                    self.flag("forbidden_op", node, f"calls {dotted}()")
            elif isinstance(func, ast.Attribute) and not self.in_jit and func.attr in self.forbidden_methods:
                self.flag("forbidden_op", node, f"calls the tensor method .{func.attr}()")
        self.generic_visit(node)

    def _visit_args(self, node: ast.Call) -> None:
        for a in [*node.args, *(k.value for k in node.keywords)]:
            self.visit(a)

    @staticmethod
    def _env_read_ok(node: ast.Call) -> bool:
        return (len(node.args) >= 1 and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                and bool(ENV_READ_OK.match(node.args[0].value)))

    def visit_Subscript(self, node: ast.Subscript) -> None:
        dotted = self.resolve(node.value)
        if dotted in ("os.environ", "os.environb") and isinstance(node.slice, ast.Constant) and isinstance(
                node.slice.value, str) and ENV_READ_OK.match(node.slice.value) and isinstance(node.ctx, ast.Load):
            return  # os.environ["TRITON_INTERPRET"]
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and self.forbid_matmul and not self.in_jit:
            self.flag("forbidden_op", node, "uses the @ operator")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str):
            return
        m = SECRET_PATH.search(node.value)
        if m:
            self.flag("secret_path", node, f"string {m.group(0)!r}")
        if node in self.docstrings:  # ast nodes compare by identity
            return
        self.cpp_flags(node)

    def cpp_flags(self, node: ast.Constant) -> None:
        if _looks_like_cpp(node.value):
            for pattern, rule, what in CUDA_RULES:
                for m in pattern.finditer(node.value):
                    line = (node.lineno or 0) + node.value[: m.start()].count("\n")
                    self.flag(rule, _At(line), f"C++ source {what} ({m.group(0).strip()})")


@dataclass
class _At:
    lineno: int


def _docstring(node: ast.AST) -> ast.Constant | None:
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            return first.value
    return None


CPP_MARKERS = ("__global__", "__device__", "#include", 'extern "C"', "torch::", "at::")
"""Text that is C++ and not prose: a docstring holding one is checked as C++ even where the file never reads
``__doc__`` (comments and other readers of the source are the runtime proof's to catch)."""


def _looks_like_cpp(text: str) -> bool:
    return any(tok in text for tok in (*CPP_MARKERS, ";\n", "{"))


def scan(source: str, forbidden_ops: Iterable[str] = ()) -> list[Flag]:
    """Flags for every tripwire in ``source``, in line order. A syntax error is not a flag (it is a
    ``compile_error``); call :func:`syntax_error` first."""
    tree = ast.parse(source)
    walker = _Walker(forbidden_ops)
    walker.docstrings = [_docstring(n) for n in ast.walk(tree) if _docstring(n) is not None]
    walker.visit(tree)
    for doc in walker.docstrings:  # a docstring reaches load_inline through __doc__; one that is C++ is checked anyway
        if walker.reads_doc or any(tok in doc.value for tok in CPP_MARKERS):
            walker.cpp_flags(doc)
    if not _defines_kernel(tree):
        walker.flags.append(Flag(code="static.no_kernel", message="the file defines no top-level kernel(...)",
                                 severity="warning"))
    return sorted(walker.flags, key=lambda f: (f.line or 0, f.code))


def syntax_error(source: str) -> str | None:
    """The syntax error of ``source`` as one line, or None."""
    try:
        ast.parse(source)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    return None


def _defines_kernel(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "kernel":
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "kernel" for t in node.targets):
            return True
    return False


_CUDA_GLOBAL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:void\s+)?"
                          r"(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(")


def own_kernel_names(source: str) -> list[str]:
    """Names of the kernels the submission defines: ``@triton.jit`` functions and ``__global__`` functions in
    its C++ strings. The profiler proof looks for these names in the trace."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if _is_triton_jit(node):
            names.append(node.name)  # type: ignore[attr-defined]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "__global__" in node.value:
            names.extend(m.group(1) for m in _CUDA_GLOBAL.finditer(node.value))
    return sorted(set(names))


def uses_load_inline(source: str) -> bool:
    """Whether the submission builds CUDA/C++ through ``torch.utils.cpp_extension.load_inline``."""
    return "load_inline" in source


__all__ = ["scan", "syntax_error", "own_kernel_names", "uses_load_inline", "RULE_TEXT"]
