"""What the parent decides without torch: statistics, roofline floors and the ceilings cache, the hidden
workload, the profile verdict, the result channel, the environment scrub and the CUDA build cache."""

from __future__ import annotations

import json
import os
import random
import statistics
import struct
from pathlib import Path

import numpy as np
import pytest

from d2kgrade.schema import HiddenDim, HiddenSpec
from d2kgrade.suite import Suite
from runner import cuda_cache, hidden, profile_proof, roofline, stats
from runner.sandbox import ChannelReader, ChannelWriter, ForgedMessage, scrub_env

ROOT = Path(__file__).resolve().parents[2]
SUITE = Suite(ROOT)
CEIL = {"copy_bytes_per_s": 4.0e12, "matmul_flops_per_s": {"bf16": 800e12, "fp16": 800e12, "fp32": 400e12,
                                                           "fp8": 1600e12, "int8": 1600e12},
        "mufu_per_s": 4.0e12}


def test_summarize_matches_numpy_and_statistics() -> None:
    xs = [0.31, 0.30, 0.35, 0.29, 0.33, 0.90, 0.30, 0.32]
    s = stats.summarize(xs)
    q1, q3 = np.percentile(xs, [25, 75])
    assert s["median_ms"] == statistics.median(xs) and s["min_ms"] == 0.29 and s["reps"] == 8
    assert s["iqr_ms"] == pytest.approx(q3 - q1)
    assert stats.summarize([]) == {"median_ms": 0.0, "iqr_ms": 0.0, "min_ms": 0.0, "reps": 0}


def test_hidden_work_rule_and_seeds() -> None:
    assert not stats.hidden_work(0.5, 0.9) and stats.hidden_work(0.5, 1.2)
    assert not stats.hidden_work(0.004, 0.05)  # launch overhead of a tiny kernel is not hidden work
    assert stats.derive_seed(1, "a", 0) == stats.derive_seed(1, "a", 0) != stats.derive_seed(1, "a", 1)
    assert 0 <= stats.derive_seed(2**62, "x") < 2**63
    assert stats.seed_hash(5) != stats.seed_hash(6) and "5" != stats.seed_hash(5)


def test_floor_is_the_largest_term() -> None:
    # softmax rows_4k, bf16: 268 MB at 4 TB/s = 67.1 us; 5*M*N flops at 800 TF/s = 0.42 us.
    cost = {"flops": 5 * 16384 * 4096, "bytes": 2 * 16384 * 4096 * 2}
    assert roofline.floor_ms(cost, CEIL, "bf16") == pytest.approx(1e3 * 268435456 / 4e12)
    # gemm 8k^3 bf16: 1.1 TFLOP at 800 TF/s = 1.374 ms, fp32 uses the TF32 ceiling (400) -> 2.749 ms.
    g = {"flops": 2 * 8192**3, "bytes": 3 * 8192 * 8192 * 2}
    assert roofline.floor_ms(g, CEIL, "bf16") == pytest.approx(1e3 * 2 * 8192**3 / 800e12)
    assert roofline.floor_ms(g, CEIL, "fp32") == pytest.approx(1e3 * 2 * 8192**3 / 400e12)
    assert roofline.floor_ms({"flops": 0, "bytes": 0, "mufu": 4e9}, CEIL, "bf16") == pytest.approx(1.0)
    assert roofline.floor_ms(cost, {}, "bf16") is None


def test_ceilings_cache_round_trip_and_plausibility(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("D2KGRADE_CACHE_DIR", str(tmp_path))
    assert roofline.load_ceilings("NVIDIA H200") is None
    path = roofline.save_ceilings("NVIDIA H200", CEIL)
    assert path == tmp_path / "ceilings-nvidia-h200.json"
    assert roofline.load_ceilings("NVIDIA H200")["copy_bytes_per_s"] == 4.0e12
    path.write_text(json.dumps({**CEIL, "copy_bytes_per_s": 1e15}))  # tampered: 1 PB/s
    assert roofline.load_ceilings("NVIDIA H200") is None
    assert roofline.save_ceilings("X", {"copy_bytes_per_s": 1.0}) is None


def test_default_hidden_workload_varies_irregular_dims() -> None:
    soft = SUITE.load_task("softmax")
    assert set(hidden.default_vary(soft)) == {"M", "N"}
    gemm = SUITE.load_task("gemm_bf16")
    assert set(hidden.default_vary(gemm)) == {"M", "N", "K"}
    draws = {tuple(hidden.draw(soft, random.Random(s), "cpu").params.items()) for s in range(8)}
    assert len(draws) == 8
    cuda_dtypes, cpu_dtypes = set(), set()
    for s in range(20):
        w = hidden.draw(soft, random.Random(s), "cpu")
        assert w.name == "hidden"
        cpu_dtypes.add(w.dtype)
        # Crossing thresholds: more than 256 rows (a first-128/256-rows kernel fails) and rows wider than 2048.
        assert 256 < w.params["M"] <= 320 and 2048 < w.params["N"] <= 2560, w.params
        g = hidden.draw(soft, random.Random(s), "cuda")
        assert 1024 < g.params["M"] <= 1280 and 2048 < g.params["N"] <= 2560, g.params
        cuda_dtypes.add(g.dtype)
    assert cuda_dtypes == cpu_dtypes == {"bf16"}  # not the smoke's fp32: an always-fp32 kernel fails every run
    # A draw the device cannot afford falls back, largest dimension first, to a perturbation of the smoke value.
    for s in range(10):
        w = hidden.draw(gemm, random.Random(s), "cpu")
        cost, smoke = gemm.cost_of(w), gemm.cost_of(gemm.smoke)
        assert cost["flops"] <= hidden.BUDGET_CPU * smoke["flops"], w.params


def test_hidden_spec_constraints() -> None:
    soft = SUITE.load_task("softmax")
    spec = soft.model_copy(update={"hidden": HiddenSpec(vary={"N": HiddenDim(multiple_of=128, min=256, max=1024)})})
    for s in range(20):
        w = hidden.draw(spec, random.Random(s), "cuda")
        assert w.params["M"] == 37 and w.params["N"] % 128 == 0 and 256 <= w.params["N"] <= 1024
    none = soft.model_copy(update={"hidden": HiddenSpec(vary={})})
    assert hidden.draw(none, random.Random(0), "cpu") is None


def test_profile_verdicts() -> None:
    judge = profile_proof.judge
    kw = dict(own_names=["_softmax_kernel"], forbidden_ops=["torch.softmax", "Tensor.softmax"],
              allowed_library_ops=[], data_numel=1000, device="cuda")
    honest = {"ops": {"aten::empty_like": 1000, "aten::copy_": 1000}, "kernels": {"_softmax_kernel": {"us": 60}}}
    assert judge(honest, **kw) == []
    codes = lambda s, **k: sorted({f.code for f in judge(s, **{**kw, **k})})  # noqa: E731
    assert codes({"ops": {"aten::_softmax": 1000}, "kernels": {"_softmax_kernel": {"us": 1}}}) == [
        "profile.forbidden_op"]
    assert codes({"ops": {"aten::exp": 1000, "aten::sum": 10}, "kernels": {"_softmax_kernel": {"us": 9}}}) == [
        "profile.torch_compute"]
    assert codes({"ops": {}, "kernels": {"cunn_SoftMaxForward<4>": {"us": 50}}}) == [
        "profile.library_kernel", "profile.no_own_kernel"]
    assert codes({"ops": {}, "kernels": {"_softmax_kernel": {"us": 10},
                                         "elementwise_kernel<copy>": {"us": 90}}}) == ["profile.foreign_kernels"]
    # An autotuned kernel's first call: Triton clears L2 with zero_ before each timed run of each config. The fills
    # write constants (no share of the work); a copy or a computing kernel of the same length still counts.
    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, 1ul> >"
    assert codes({"ops": {}, "kernels": {"_softmax_kernel": {"us": 120}, fill: {"us": 200}}}) == []
    flagged = judge({"ops": {}, "kernels": {"_softmax_kernel": {"us": 120}, fill: {"us": 200},
                                            "elementwise_kernel<copy>": {"us": 150}}}, **kw)
    assert [f.code for f in flagged] == ["profile.foreign_kernels"]
    assert "120 of 270 us" in flagged[0].message and "elementwise_kernel<copy> (150 us)" in flagged[0].message
    gemm = {"ops": {}, "kernels": {"my_gemm": {"us": 90}, "sm90_xmma_gemm_bf16": {"us": 5}}}
    assert codes(gemm, own_names=["my_gemm"]) == ["profile.library_kernel"]
    assert codes(gemm, own_names=["my_gemm"], allowed_library_ops=["sm90_xmma"]) == []
    assert codes({"ops": {}}, device="cpu", own_launches=0) == ["profile.no_own_kernel"]
    assert codes({"ops": {"aten::zeros": 1000}}, device="cpu", own_launches=2) == []
    assert profile_proof.forbidden_aten_names(["@", "torch.nn.functional.linear"]) >= {"mm", "bmm", "matmul", "linear"}


def _frame(body: bytes, mac: bytes = b"\0" * 32) -> bytes:
    return struct.pack(">I", len(body) + 32) + mac + body


def test_channel_authenticates_and_orders_frames() -> None:
    r, w = os.pipe()
    key = os.urandom(32)
    writer = ChannelWriter(w, key)
    writer.send("a", x=1)
    writer.send("b", y=[1, 2])
    data = os.read(r, 1 << 16)
    reader = ChannelReader(key)
    msgs = reader.feed(data[:10]) + reader.feed(data[10:])
    assert [(m["seq"], m["kind"]) for m in msgs] == [(0, "a"), (1, "b")]
    with pytest.raises(ForgedMessage, match="authentication"):
        ChannelReader(key).feed(_frame(b'{"seq": 0, "kind": "done"}'))
    with pytest.raises(ForgedMessage, match="sequence"):
        ChannelReader(key).feed(data[len(data) // 2:] if False else _replay_second(data))
    with pytest.raises(ForgedMessage):
        ChannelReader(key).feed(struct.pack(">I", 1 << 30))
    os.close(r)
    os.close(w)


def _replay_second(data: bytes) -> bytes:
    n = struct.unpack(">I", data[:4])[0]
    return data[4 + n:]  # the second frame alone: authentic, but out of sequence


def test_scrub_env_keeps_only_allowlisted_harmless_names() -> None:
    env = {"PATH": "/bin", "LANG": "C", "CUDA_VISIBLE_DEVICES": "0", "TRITON_CACHE_DIR": "/c",
           "OPENAI_API_KEY": "k", "AWS_ACCESS_KEY_ID": "a", "TRITON_REMOTE_TOKEN": "t", "HOME": "/home/u",
           "GITHUB_TOKEN": "g", "MY_PASSWORD": "p", "SSH_AUTH_SOCK": "/s", "PYTHONPATH": "/x", "LD_PRELOAD": "/e.so"}
    assert scrub_env(env) == {"PATH": "/bin", "LANG": "C", "CUDA_VISIBLE_DEVICES": "0", "TRITON_CACHE_DIR": "/c"}


def test_cuda_build_cache_is_per_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("D2KGRADE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cuda_cache, "_reachable", lambda path: True)
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    cuda_cache.arch_list.cache_clear()
    a, b = cuda_cache.source_hash("src a"), cuda_cache.source_hash("src b")
    assert cuda_cache.extensions_dir(a) != cuda_cache.extensions_dir(b)
    env = cuda_cache.build_env(a)
    assert env["TORCH_EXTENSIONS_DIR"] == str(cuda_cache.extensions_dir(a)) and env["TORCH_CUDA_ARCH_LIST"] == "9.0"
    assert not cuda_cache.is_built(a)
    (cuda_cache.extensions_dir(a) / "ext").mkdir(parents=True)
    (cuda_cache.extensions_dir(a) / "ext" / "ext.so").write_bytes(b"")
    assert cuda_cache.is_built(a) and not cuda_cache.is_built(b)
    assert cuda_cache.prebuild("src a") == {"built": True, "cached": True, "seconds": 0.0, "log": ""}
    cuda_cache.arch_list.cache_clear()


def test_cuda_build_cache_leaves_a_private_home_for_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As root the kernel host is another uid: a build under a private cache folder (/root/.cache, mode 700) is
    out of its reach, so the builds go to a root-owned folder it can traverse; one someone else could write to is
    refused with a message, never used."""
    private = tmp_path / "home"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    monkeypatch.setenv("D2KGRADE_CACHE_DIR", str(private / ".cache"))
    fallback = tmp_path / "var-tmp" / "builds"
    monkeypatch.setattr(cuda_cache, "FALLBACK_ROOT", fallback)
    monkeypatch.setattr(cuda_cache.os, "geteuid", lambda: 0)
    monkeypatch.setattr(cuda_cache, "_reachable", lambda path: private not in [path, *path.parents])
    sha = cuda_cache.source_hash("src")
    assert cuda_cache.extensions_dir(sha) == fallback / sha[:24]
    assert fallback.stat().st_mode & 0o777 == 0o711
    monkeypatch.setattr(cuda_cache.os, "geteuid", lambda: 1000)  # not root: the host is the same uid
    assert cuda_cache.extensions_dir(sha) == private / ".cache" / "torch_extensions" / sha[:24]
    monkeypatch.setattr(cuda_cache.os, "geteuid", lambda: 0)
    fallback.chmod(0o777)  # writable by anyone: could hold a planted build
    with pytest.raises(RuntimeError, match="only root can write"):
        cuda_cache.extensions_dir(sha)


def test_private_folders_are_unreachable_for_another_uid() -> None:
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(dir="/tmp"))  # pytest's tmp_path is itself private (0700)
    try:
        base.chmod(0o755)
        (base / "open" / "sub").mkdir(parents=True)
        for folder in (base / "open", base / "open" / "sub"):
            folder.chmod(0o755)
        (base / "shut").mkdir(mode=0o700)
        (base / "shut").chmod(0o700)
        assert cuda_cache._reachable(base / "open" / "sub" / "missing")
        assert not cuda_cache._reachable(base / "shut" / "torch_extensions")
    finally:
        shutil.rmtree(base)


def test_rotated_call_count_has_no_fixed_top() -> None:
    import statistics

    from runner.evaluator import CPU_ROTATION_RANGE, rotation_calls

    lo, hi = CPU_ROTATION_RANGE
    draws = [rotation_calls(random.Random(s), lo, hi) for s in range(20000)]
    assert min(draws) == lo and max(draws) > 30  # 4 trials + at least 7: stale after its 10th call always fails
    assert 10 <= statistics.fmean(draws) <= 12
    late = sum(d + 4 > 20 for d in draws) / len(draws)  # a kernel stale after its 20th call is caught this often
    assert 0.03 < late < 0.09, late


def test_a_forked_child_that_cannot_use_cuda_says_no_fast() -> None:
    """The zygote's probe (runner.worker._forked_cuda_works): on a machine without a usable GPU the forked child's
    CUDA initialization fails, and the probe answers no within its limit instead of hanging or raising."""
    import time

    import torch

    from runner.worker import _forked_cuda_works

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the probe would answer yes")
    t0 = time.monotonic()
    assert _forked_cuda_works(timeout_s=60.0) is False
    assert time.monotonic() - t0 < 30.0
