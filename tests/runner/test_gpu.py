"""The evaluator on a real GPU: timing, baselines, roofline, profiler proof, side streams, crashes and the CUDA
build cache. Run on the device with ``pytest -m gpu tests/runner -q``; skipped without CUDA."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from runner import roofline
from runner.evaluate import EvalOptions, run_evaluation

pytestmark = pytest.mark.gpu

HERE = Path(__file__).resolve().parent
HONEST = HERE / "honest"
ADV = HERE / "adversarial"
FAST = dict(target_s=0.2, min_reps=20, max_reps=200)


def run(task: str, path: Path, workloads: str | list[str], *, tripwires: bool = True, compile_baseline: bool = False,
        hidden: bool = False, **kw):
    kw.setdefault("candidates", ("eager", "compile") if compile_baseline else ("eager",))
    return run_evaluation(task, path, device="cuda", workloads=workloads, seed=11, hidden=hidden, timeout_s=600,
                          options=EvalOptions(tripwires=tripwires, compile_baseline=compile_baseline, **FAST, **kw))


def test_honest_kernel_timed_against_live_baselines() -> None:
    r = run("softmax", HONEST / "rows_per_program.py", ["short_rows_fp32"], compile_baseline=True, hidden=True)
    assert r.status == "passed", r.message + r.log[-3000:]
    w = r.workloads[0]
    assert w.time and w.eager and w.compiled and w.time.reps >= 20
    assert w.speedup_eager == pytest.approx(w.eager.median_ms / w.time.median_ms)
    assert w.roofline_floor_ms and 0 < w.roofline_fraction <= 1 / roofline.FLOOR_MARGIN
    assert w.host_ms is not None and w.checked_calls >= w.time.reps  # every timed output was checked
    # The timed sets alternate softmax's distributions (normal, shifted, peaked): the samples split by set.
    assert set(w.time_by_dist) <= {"normal", "shifted", "peaked"} and len(w.time_by_dist) >= 2, w.time_by_dist
    assert sum(t.reps for t in w.time_by_dist.values()) == w.time.reps
    assert w.compile_warmup_s is not None and w.compile_warmup_s > 0
    assert r.ceilings and r.ceilings["copy_bytes_per_s"] > 1e12
    assert r.environment.gpu and r.environment.driver and r.environment.cuda
    assert r.workloads[-1].hidden and r.workloads[-1].status == "passed" and r.workloads[-1].time is None
    assert [b.name for b in w.baselines] == ["eager", "compile"] and w.best_baseline in ("eager", "compile")
    assert all(b.status == "ok" and b.time and b.cache_key for b in w.baselines), w.baselines
    assert w.speedup_best == pytest.approx(min(b.time.median_ms for b in w.baselines) / w.time.median_ms)
    # The kernel host ran as its own uid, with the GPU; the evaluator's clock agreed with its events.
    assert r.environment.sandbox.startswith("kernel host as uid"), r.environment.sandbox
    assert r.environment.buffers == "gpu", r.environment.buffers  # sets and fetched rows in shared GPU memory
    assert w.evaluator_ms is not None and "timing.untrusted" not in {f.code for f in r.flags}
    again = run("softmax", HONEST / "rows_per_program.py", ["short_rows_fp32"], compile_baseline=True)
    assert all(b.cached for b in again.workloads[0].baselines), again.workloads[0].baselines  # the baseline cache


def test_timing_is_repeatable() -> None:
    # Two fresh evaluations. The old per-call loop missed 5% here (run 1); the batched one held five evaluations
    # of rows_4k within 0.64% (150 reps, benchmarks/data/runs/references_h200_quick_run2.json).
    a = run("softmax", HONEST / "masked_one_pass.py", ["rows_4k"])
    b = run("softmax", HONEST / "masked_one_pass.py", ["rows_4k"])
    assert a.status == b.status == "passed", a.message + b.message
    ma, mb = a.workloads[0].time.median_ms, b.workloads[0].time.median_ms
    assert a.workloads[0].time.reps >= 100, a.workloads[0].time
    assert abs(ma - mb) / min(ma, mb) < 0.02, (ma, mb)


def test_side_stream_work_is_caught() -> None:
    r = run("softmax", ADV / "gpu" / "side_stream.py", ["rows_4k"])
    assert r.status == "rejected" and "static.stream" in {f.code for f in r.flags}
    rt = run("softmax", ADV / "gpu" / "side_stream.py", ["rows_4k"], tripwires=False)
    assert rt.status == "rejected", rt.message
    assert {f.code for f in rt.flags} & {"timing.hidden_work", "timing.below_roofline"}, rt.flags


def test_profiler_proof_on_gpu() -> None:
    r = run("softmax", ADV / "torch_op_method.py", ["rows_4k"], tripwires=False)
    assert r.status == "rejected"
    assert {f.code for f in r.flags} >= {"profile.forbidden_op", "profile.no_own_kernel"}, r.flags
    g = run("softmax", ADV / "ghost_kernel.py", ["rows_4k"], tripwires=False)
    assert g.status == "rejected" and "profile.torch_compute" in {f.code for f in g.flags}, g.flags


def test_compute_bound_cache_is_rejected() -> None:
    r = run("gemm_bf16", ADV / "gpu" / "gemm_cache.py", ["square_8k"])
    assert r.status == "rejected", r.message
    assert {f.code for f in r.flags} & {"timing.below_roofline", "profile.torch_compute"}, r.flags


@pytest.mark.parametrize("name", ["allocator_reuse.py", "address_cache.py"])
def test_allocator_and_address_games_fail(name: str) -> None:
    r = run("softmax", ADV / "gpu" / name, ["rows_4k"], tripwires=False)
    assert r.status in ("incorrect", "rejected"), r.message


def test_a_native_thread_and_a_forged_clock_are_caught() -> None:
    r = run("softmax", HERE / "adversarial_next" / "native_thread.py", ["rows_4k"], tripwires=False)
    assert r.status == "rejected", r.message
    # The clock's error on the H200 is 0.1-0.6 ms per call (runner/eval_timing.py): it can hold a host to a long
    # kernel, not to a 73 us one, so the forged host hides 90% of a call of 256 launches; the same kernel honest passes.
    honest = run("softmax", HONEST / "gpu" / "slow_softmax.py", ["rows_4k"])
    assert honest.status == "passed" and "timing.untrusted" not in {f.code for f in honest.flags}, honest.message
    forged = run("softmax", HONEST / "gpu" / "slow_softmax.py", ["rows_4k"], forge_events=0.1)
    assert forged.status == "rejected" and "timing.untrusted" in {f.code for f in forged.flags}, forged.message


def test_illegal_memory_access_is_a_status_and_the_next_run_is_clean() -> None:
    r = run("softmax", ADV / "gpu" / "illegal_access.py", ["rows_4k"])
    assert r.status == "crashed", r.message
    ok = run("softmax", HONEST / "rows_per_program.py", ["short_rows_fp32"])
    assert ok.status == "passed", ok.message


class _Spin:
    """Stands in for the flush buffer: keeps the GPU busy about as long as a flush (~100 us), so the launch of the
    timed call stays hidden as it does behind a flush, but touches no memory: L2 keeps what it holds."""

    def __init__(self, device) -> None:
        self.device = device

    def zero_(self) -> None:
        import torch

        torch.cuda._sleep(200_000)


def test_l2_flush_makes_a_cache_resident_copy_slower() -> None:
    import torch

    from runner.timing import Rotation, flush_buffer, timed_reps

    dev = torch.device("cuda")
    flush = flush_buffer(dev)
    assert flush.numel() >= 4 * torch.cuda.get_device_properties(dev).L2_cache_size
    src = [(torch.randn(2 << 20, device=dev),) for _ in range(2)]  # 8 MB: fits in L2
    out = torch.empty(2 << 20, device=dev)
    rot = Rotation.make(src)

    def copy(args):
        return out.copy_(args[0])

    flushed = sorted(timed_reps(copy, rot, 50, flush))[25]
    resident = sorted(timed_reps(copy, rot, 50, _Spin(dev)))[25]
    assert flushed > 1.1 * resident, (flushed, resident)


@pytest.mark.slow
def test_cuda_submission_builds_once() -> None:
    from runner import cuda_cache

    src = (HONEST / "gpu" / "cuda_softmax.py").read_text()
    t0 = time.monotonic()
    first = run("softmax", HONEST / "gpu" / "cuda_softmax.py", ["short_rows_fp32"])
    t_first = time.monotonic() - t0
    assert first.status == "passed", first.message + first.log[-3000:]
    assert cuda_cache.is_built(cuda_cache.source_hash(src))
    t0 = time.monotonic()
    second = run("softmax", HONEST / "gpu" / "cuda_softmax.py", ["short_rows_fp32"])
    t_second = time.monotonic() - t0
    assert second.status == "passed"
    assert cuda_cache.prebuild(src)["cached"]
    assert second.prebuild_s == 0.0 and second.import_s is not None and second.import_s < 5.0, second.import_s
    print(f"CUDA submission: first evaluation {t_first:.1f} s (build included), second {t_second:.1f} s")


def test_correctness_calls_on_gpu_buffers() -> None:
    # EvalOptions.gpu_call_buffers: the kernel gets the shared GPU inputs themselves, so a write to them must still
    # be seen (the evaluator's private copy after the reply), and an honest kernel must still pass.
    honest = run("softmax", HONEST / "rows_per_program.py", ["short_rows_fp32"], hidden=True, gpu_call_buffers=True)
    assert honest.status == "passed", honest.message + honest.log[-3000:]
    assert honest.environment.buffers == "gpu", honest.environment.buffers
    mutated = run("softmax", ADV / "mutate_input.py", ["rows_4k"], tripwires=False, gpu_call_buffers=True)
    assert mutated.status == "rejected" and "input_mutated" in {f.code for f in mutated.flags}, mutated.message
    cached = run("softmax", ADV / "cache_pointer.py", ["rows_4k"], tripwires=False, gpu_call_buffers=True)
    assert cached.status in ("incorrect", "rejected"), cached.message
