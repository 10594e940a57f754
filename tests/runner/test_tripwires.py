"""Static tripwires: each rule fires on a small snippet with the right line, and honest kernels raise none."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.tripwires import own_kernel_names, scan, syntax_error, uses_load_inline

SOFTMAX_OPS = ["torch.softmax", "torch.nn.functional.softmax", "Tensor.softmax"]
GEMM_OPS = ["torch.matmul", "torch.mm", "Tensor.matmul", "@"]

CASES = [
    # (rule, line, source)
    ("stream", 3, "import torch\ndef kernel(x):\n    s = torch.cuda.Stream()\n    return x"),
    ("stream", 4,
     "import torch\nfrom torch import cuda as c\ndef kernel(x):\n    with c.stream(c.Stream()):\n        pass"),
    ("thread", 1, "import threading\ndef kernel(x):\n    return x"),
    ("thread", 1, "from concurrent.futures import ThreadPoolExecutor\ndef kernel(x):\n    return x"),
    ("subprocess", 3, "import os\ndef kernel(x):\n    os.system('ls')\n    return x"),
    ("subprocess", 1, "import subprocess\ndef kernel(x):\n    return x"),
    ("process_exit", 3, "import os\ndef kernel(x):\n    f = os._exit\n    f(0)"),
    ("process_exit", 1, "from os import _exit as bye\ndef kernel(x):\n    bye(0)"),
    ("monkeypatch", 3, "import torch\nT = torch.Tensor\nT.__add__ = lambda a, b: a\ndef kernel(x):\n    return x"),
    ("monkeypatch", 2, "import time\ntime.perf_counter = lambda: 0.0\ndef kernel(x):\n    return x"),
    ("monkeypatch", 2, "import triton\nsetattr(triton, 'jit', None)\ndef kernel(x):\n    return x"),
    ("monkeypatch", 2, "import sys\nsys.modules['torch'] = None\ndef kernel(x):\n    return x"),
    ("monkeypatch", 3, "import torch\ndef kernel(x):\n    x.__class__ = int\n    return x"),
    ("frame_walk", 3, "import sys\ndef kernel(x):\n    f = sys._getframe(1)\n    return x"),
    ("frame_walk", 1, "import inspect\ndef kernel(x):\n    return x"),
    ("frame_walk", 1, "import gc\ndef kernel(x):\n    return x"),
    ("frame_walk", 5,
     "def kernel(x):\n    try:\n        1 / 0\n    except Exception as e:\n        fr = e.__traceback__.tb_frame\n"),
    ("frame_walk", 2, "def kernel(x):\n    g = globals()\n    return x"),
    ("dynamic_code", 2, "def kernel(x):\n    exec('import os')\n    return x"),
    ("dynamic_code", 3, "import os\ndef kernel(x):\n    getattr(os, '_ex' + 'it')(0)"),
    ("dynamic_code", 1, "import ctypes\ndef kernel(x):\n    return x"),
    ("env_access", 3, "import os\ndef kernel(x):\n    k = os.environ.get('OPENAI_API_KEY')\n    return x"),
    ("env_access", 3, "import os\ndef kernel(x):\n    k = dict(os.environ)\n    return x"),
    ("env_access", 3, "import os\ndef kernel(x):\n    k = os.getenv('HOME')\n    return x"),
    ("file_access", 2, "def kernel(x):\n    open('/tmp/x', 'w').write('1')\n    return x"),
    ("secret_path", 2, "def kernel(x):\n    p = '/home/u/.aws/credentials'\n    return x"),
    ("network", 1, "import socket\ndef kernel(x):\n    return x"),
    ("harness_import", 1, "from runner.compare import compare_tensor\ndef kernel(x):\n    return x"),
    ("tensor_subclass", 2, "import torch\nclass T(torch.Tensor):\n    pass\ndef kernel(x):\n    return x"),
    ("tensor_subclass", 2,
     "class L:\n    def __torch_function__(self, *a):\n        pass\ndef kernel(x):\n    return x"),
    ("forbidden_op", 3, "import torch.nn.functional as F\ndef kernel(x):\n    return F.softmax(x, -1)"),
    ("forbidden_op", 3, "from torch import softmax as sm\ndef kernel(x):\n    return sm(x, -1)"),
    ("forbidden_op", 2, "def kernel(x):\n    return x.softmax(-1)"),
    ("forbidden_op", 3, "import torch\ndef kernel(x):\n    f = torch.softmax\n    return f(x, -1)"),
    ("stream", 5, 'import torch\nfrom torch.utils.cpp_extension import load_inline\nsrc = """\n#include <cuda.h>\n'
                  'void f() { cudaStream_t s; cudaStreamCreate(&s); }\n"""\ndef kernel(x):\n    return x'),
    ("thread", 4, 'from torch.utils.cpp_extension import load_inline\nsrc = """\n#include <thread>\n'
                  'void f() { std::thread t([]{}); }\n"""\ndef kernel(x):\n    return x'),
]


@pytest.mark.parametrize("rule,line,source", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_tripwire_fires_with_its_line(rule: str, line: int, source: str) -> None:
    flags = scan(source, SOFTMAX_OPS)
    hits = [(f.code, f.line) for f in flags if f.severity == "reject"]
    assert (f"static.{rule}", line) in hits, hits


def test_matmul_rules_spare_triton_kernels() -> None:
    src = ("import torch, triton\nimport triton.language as tl\n@triton.jit\ndef _k(a, b):\n"
           "    acc = a @ b\n    acc = tl.dot(a, b)\n\ndef kernel(A, B):\n    return torch.matmul(A, B.T)\n\n"
           "def other(A, B):\n    return A @ B\n")
    hits = [(f.code, f.line) for f in scan(src, GEMM_OPS)]
    assert hits == [("static.forbidden_op", 9), ("static.forbidden_op", 12)]


def test_allowed_environment_reads_and_honest_kernels_pass() -> None:
    src = ("import os\nimport torch\nINTERP = os.environ.get('TRITON_INTERPRET') == '1'\n"
           "DEV = os.environ['CUDA_VISIBLE_DEVICES'] if 'x' else ''\ndef kernel(x):\n    return x\n")
    assert scan(src, SOFTMAX_OPS) == []
    for path in sorted((Path(__file__).parent / "honest").glob("*.py")):
        assert scan(path.read_text(), SOFTMAX_OPS) == [], path.name


def test_local_names_that_shadow_modules_are_not_modules() -> None:
    src = "def kernel(x):\n    time = {}\n    time['a'] = 1\n    out = x.clone()\n    out.data = x\n    return out\n"
    assert [f.code for f in scan(src, SOFTMAX_OPS)] == []


def test_syntax_error_and_missing_kernel() -> None:
    assert syntax_error("def kernel(:\n") is not None and syntax_error("x = 1\n") is None
    assert [f.code for f in scan("x = 1\n")] == ["static.no_kernel"]
    assert scan("x = 1\n")[0].severity == "warning"


def test_own_kernel_names_and_load_inline() -> None:
    src = ('import triton\nfrom triton import jit\n@triton.jit\ndef _a(x):\n    pass\n@jit\ndef _b(x):\n    pass\n'
           '@triton.heuristics({})\n@triton.jit\ndef _c(x):\n    pass\n'
           'cuda = """\n__global__ void __launch_bounds__(256) softmax_fwd(float* x) {}\n'
           'template <int N> __global__ void tiled_k(float* y) {}\n"""\n'
           'from torch.utils.cpp_extension import load_inline\n')
    assert own_kernel_names(src) == ["_a", "_b", "_c", "softmax_fwd", "tiled_k"]
    assert uses_load_inline(src) and not uses_load_inline("import torch\n")


def test_launcher_classes_of_production_kernels_pass() -> None:
    # Liger wraps each kernel in a torch.autograd.Function; vLLM's layers are nn.Modules. Neither intercepts torch.
    src = ("import torch\nimport torch.nn as nn\nfrom torch.autograd import Function\n"
           "class RMSNormFunction(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
           "        return x\nclass Rope(nn.Module):\n    pass\nclass G(Function):\n    pass\n"
           "def kernel(x):\n    return RMSNormFunction.apply(x)\n")
    assert scan(src, SOFTMAX_OPS) == []
    hooked = src.replace("    pass\nclass G", "    def __torch_function__(self, *a):\n        pass\nclass G")
    assert [(f.code, f.line) for f in scan(hooked, SOFTMAX_OPS)] == [("static.tensor_subclass", 9)]
    assert [f.code for f in scan("import torch\nclass T(torch.nn.Parameter):\n    pass\n"
                                 "def kernel(x):\n    return x\n")] == ["static.tensor_subclass"]


def test_read_only_driver_queries_pass_and_the_rest_of_the_driver_does_not() -> None:
    # Triton's tutorials: DEVICE from the active driver, NUM_SM from its device properties.
    src = ("import triton\nfrom triton.runtime import driver\n"
           "DEVICE = triton.runtime.driver.active.get_active_torch_device()\n"
           "NUM_SM = driver.active.utils.get_device_properties(DEVICE.index)['multiprocessor_count']\n"
           "ARCH = triton.runtime.driver.active.get_current_target().arch\n"
           "def kernel(x):\n    return x\n")
    assert scan(src, SOFTMAX_OPS) == []
    for line in ("driver.set_active(object())", "triton.runtime.driver.active.get_benchmarker()",
                 "d = driver", "driver.active = None"):
        hits = [f.code for f in scan(src + line + "\n", SOFTMAX_OPS) if f.line == 8]
        assert hits == ["static.monkeypatch"], (line, hits)


def test_docstrings_are_prose_unless_the_file_reads_doc() -> None:
    """A figure table in a docstring names its peers (round 19 rejected four references for 'cublaslt' beside a
    brace); a docstring that reaches load_inline through __doc__ is C++ and checked as such."""
    doc = '"""H200: 1.02x cublaslt; {M, N} tiles;\nsee cudnn_benchmark."""\n'
    body = "import torch\n\n\ndef kernel(x):\n    return x\n"
    assert [f.code for f in scan(doc + body) if f.severity != "warning"] == []
    for reader in ("src = __doc__\n", "import sys\nsrc = sys.modules[__name__].__doc__\n",
                   "src = getattr(kernel, '__doc__')\n"):
        flags = scan(doc + body + reader)
        assert [f.line for f in flags if f.code == "static.library_call"] == [1, 2], reader
    cpp = '"""extern "C" int cublasGemmEx(void*);\nvoid f() { cublasGemmEx(0); }"""\n'
    assert [f.line for f in scan(cpp + body) if f.code == "static.library_call"] == [1, 2], "C++ in a docstring"


def test_every_reference_passes_the_tripwires() -> None:
    """The team's references are honest kernels: an error flag on one is a false positive of the tripwires."""
    root = Path(__file__).resolve().parents[2] / "references"
    found = {p.relative_to(root).as_posix(): [f.message for f in scan(p.read_text()) if f.severity != "warning"]
             for p in sorted(root.glob("*/*.py"))}
    assert len(found) >= 26
    assert {p: m for p, m in found.items() if m} == {}
