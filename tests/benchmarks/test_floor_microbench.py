"""benchmarks/floor_microbench.py: its kernels compute the right thing (``--smoke``, Triton interpreter), it refuses to
time on a machine without a GPU, and the derived-floor formulas (tasks' ``cost.derived_floor``) give the values
worked out by hand below."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from d2kgrade.schema import DerivedFloor, Task
from runner.evaluate import load_task

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "floor_microbench.py"
TASKS = ("topk", "histogram", "spmv_csr", "selective_scan")


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("d2k_floor_microbench", SCRIPT)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env={**os.environ, **env})


def test_smoke_checks_every_kernel_against_numpy() -> None:
    proc = _run("--smoke")
    assert proc.returncode == 0, proc.stderr[-3000:]
    done = proc.stdout.strip().removeprefix("smoke ok: ").split(", ")
    assert done == ["two_pass", "histogram", "atomics", "topk_digits", "gather", "scan_step", "fma", "rate_configs",
                    "rates_plumbing"]


def test_refuses_to_time_without_a_gpu(tmp_path: Path) -> None:
    out = tmp_path / "floors.json"
    proc = _run("--out", str(out), CUDA_VISIBLE_DEVICES="", TRITON_INTERPRET="1")
    assert proc.returncode == 2 and "--smoke" in proc.stderr and "no CUDA GPU" in proc.stderr
    assert not out.exists()


def _counts(task_id: str, workload: str) -> dict[str, float]:
    task = load_task(ROOT, task_id)
    return task.derived_floor_counts(task.workload(workload))


def test_topk_counts_by_hand() -> None:
    # sparse_attention_k2048: B*V = 1024 * 131072 = 134,217,728 keys, fp32 (elt 4), k = 2048 > 256 (radix select):
    # lane_ops 2*B*V = 268,435,456; one histogram update per key; two reads of 4 bytes per key = 1,073,741,824 bytes.
    assert _counts("topk", "sparse_attention_k2048") == {
        "lane_ops": 268435456, "histogram_updates": 134217728, "two_pass_bytes": 1073741824}
    # moe_router_k8: V = 256 <= 1024, so k = 8 arg-max rounds of a compare and a select: 2*8*32768*256 = 134,217,728.
    assert _counts("topk", "moe_router_k8") == {"lane_ops": 134217728, "histogram_updates": 0, "two_pass_bytes": 0}
    # bf16_ties_k256: k = 256 is a single-pass (running threshold) case: only 2*128*256000 = 65,536,000 lane ops.
    assert _counts("topk", "bf16_ties_k256") == {"lane_ops": 65536000, "histogram_updates": 0, "two_pass_bytes": 0}


def test_histogram_spmv_scan_counts_by_hand() -> None:
    # vocab_bins: one count per key, N = 2**26.
    assert _counts("histogram", "vocab_bins") == {"histogram_updates": 67108864}
    # stencil_27pt: one gather per nonzero; a 27-point stencil on 256 x 256 x 128 has (3*256-2)^2 * (3*128-2)
    # = 766 * 766 * 382 = 224,140,792 of them.
    assert _counts("spmv_csr", "stencil_27pt") == {"gathers": 766 * 766 * 382}
    # mamba_2p8b: batch*D*L*N = 8 * 5120 * 4096 * 16 = 2,684,354,560 recurrence steps.
    assert _counts("selective_scan", "mamba_2p8b") == {"scan_steps": 2684354560}


def test_derived_floor_is_the_largest_term_or_the_roofline() -> None:
    floor = _bench().derived_floor_ms
    # vocab_bins: 67,108,864 keys at 1e11 keys/s take 0.67108864 ms, above the 0.0645 ms roofline: 10.4x.
    f = floor(0.0645, {"histogram_updates": 67108864}, {"histogram_updates": 1e11})
    assert f["derived_floor_ms"] == pytest.approx(0.67108864) and f["binding"] == "histogram_updates"
    assert f["ratio"] == pytest.approx(0.67108864 / 0.0645)
    # Two terms: 1e9 bytes at 1e13 B/s = 0.1 ms, 1e8 keys at 5e11/s = 0.2 ms; the larger binds.
    f = floor(0.05, {"two_pass_bytes": 1e9, "histogram_updates": 1e8}, {"two_pass_bytes": 1e13,
                                                                         "histogram_updates": 5e11})
    assert f["derived_floor_ms"] == pytest.approx(0.2) and f["binding"] == "histogram_updates"
    assert f["terms_ms"] == pytest.approx({"two_pass_bytes": 0.1, "histogram_updates": 0.2})
    # A term under the roofline leaves the roofline floor; a zero count needs no rate.
    f = floor(0.5, {"lane_ops": 3.35e9, "gathers": 0}, {"lane_ops": 3.35e13})
    assert f["derived_floor_ms"] == 0.5 and f["binding"] == "roofline" and f["terms_ms"] == {"lane_ops": 0.1}


def test_every_workload_resource_has_a_primitive_and_the_measurement_is_the_floors_file() -> None:
    bench = _bench()
    data = json.loads((ROOT / "benchmarks" / "data" / "floors_h200.json").read_text())
    for tid in TASKS:
        task = load_task(ROOT, tid)
        floor = task.cost.derived_floor
        assert floor is not None and floor.source == "benchmarks/data/floors_h200.json"
        assert floor.gpu == data["gpu"]["name"] and floor.date.isoformat() == data["date"][:10]
        assert "not measured yet" not in floor.why and "Measured on the H200" in floor.why
        assert floor.measured is not None and set(floor.measured) == {w.name for w in task.workloads}
        for w in task.workloads:
            counts = task.derived_floor_counts(w)
            assert all(c >= 0 for c in counts.values()) and any(c > 0 for c in counts.values())
            assert set(bench.rate_configs(task, w)) == {r for r, c in counts.items() if c > 0}
            # The task's figures are the file's, to the 4-5 significant digits written in task.yaml.
            got, want = floor.measured[w.name], data["floors"][tid][w.name]
            assert got.binding == want["binding"] and set(got.rates) == set(want["rates"])
            assert got.roofline_ms == pytest.approx(want["roofline_floor_ms"], rel=5e-4)
            assert got.derived_ms == pytest.approx(want["derived_floor_ms"], rel=5e-4)
            for r, rate in got.rates.items():
                assert rate == pytest.approx(want["rates"][r], rel=5e-5)
            # And the file's derived floor is the largest term over its own counts and rates, or the roofline floor.
            assert want["counts"] == pytest.approx(counts)
            assert want == {**want, **bench.derived_floor_ms(want["roofline_floor_ms"], counts, want["rates"])}


def _task_data(**floor: Any) -> dict[str, Any]:
    data = load_task(ROOT, "histogram").model_dump(mode="json")
    data["cost"]["derived_floor"] = {"why": "w", "terms": [{"resource": "histogram_updates", "count": "N",
                                                            "why": "w"}], **floor}
    return data


def _measured(**m: Any) -> dict[str, Any]:
    one = {"roofline_ms": 0.25, "derived_ms": 0.84, "binding": "histogram_updates",
           "rates": {"histogram_updates": 3.2e11}, **m}
    return {"measured": {"uniform_256": one}, "source": "benchmarks/data/floors_h200.json", "gpu": "NVIDIA H200",
            "date": "2026-12-02"}


def test_schema_validates_the_derived_floor() -> None:
    Task.model_validate(_task_data())
    Task.model_validate(_task_data(**_measured()))
    Task.model_validate(_task_data(**_measured(derived_ms=0.25, binding="roofline")))
    bad = [
        {k: v for k, v in _measured().items() if k != "source"},                    # a figure without its source
        {k: v for k, v in _measured().items() if k != "date"},                      # ... or its date
        {**_measured(), "measured": {"no_such": _measured()["measured"]["uniform_256"]}},  # not a catalog workload
        _measured(roofline_ms=-1.0),                                                # not a time
        _measured(derived_ms=float("nan")),
        _measured(binding="roofline"),                                              # roofline binds: floors equal
        _measured(derived_ms=0.25),                                                 # a term binds: derived above
        _measured(binding="gathers"),                                               # not a term of the task
        _measured(rates={"gathers": 1e11}),
        _measured(rates={}),
        _measured(rates={"histogram_updates": 0.0}),
        _measured(ms=0.84),                                                         # unknown field
        {**_measured(), "date": "yesterday"},
        dict(measured={"uniform_256": 0.9}, source="f.json", gpu="g", date="2026-12-02"),  # the old bare-ms shape
        dict(terms=[{"resource": "warp_magic", "count": "N", "why": "w"}]),         # unknown resource
        dict(terms=[{"resource": "gathers", "count": "nnz", "why": "w"}]),          # nnz is no histogram parameter
        dict(terms=[{"resource": "gathers", "count": "N", "why": "w"}] * 2),        # one term per resource
        dict(terms=[]),
    ]
    for floor in bad:
        with pytest.raises(ValidationError):
            Task.model_validate(_task_data(**floor))
    with pytest.raises(ValidationError):
        DerivedFloor.model_validate({"why": "w", "terms": [{"resource": "gathers", "count": "__import__('os')",
                                                            "why": "w"}]})
