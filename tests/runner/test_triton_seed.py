"""The kernel host's Triton cache: a new one starts as a copy of the trusted cache's harness kernels
(runner.sandbox), and with ``keep_triton_cache`` one folder per source is kept across evaluations, autotuning
results included (runner.cuda_cache.triton_dir)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.sandbox import seed_triton_cache


def _entry(root: Path, key: str, files: dict[str, bytes]) -> None:
    (root / key).mkdir(parents=True)
    for name, data in files.items():
        (root / key / name).write_bytes(data)


def test_only_harness_kernels_and_helper_modules_are_copied(tmp_path: Path) -> None:
    src, dst = tmp_path / "trusted", tmp_path / "host" / ".triton"
    _entry(src, "a" * 8, {"_warmup_kernel.json": b"{}", "_warmup_kernel.cubin": b"\x7fELF",
                          "_warmup_kernel.ptx": b"ptx"})
    _entry(src, "b" * 8, {"__grp__digest_kernel.json": b"{}"})
    _entry(src, "c" * 8, {"__triton_launcher.cpython-312-x86_64-linux-gnu.so": b"so"})
    _entry(src, "d" * 8, {"cuda_utils.cpython-312-x86_64-linux-gnu.so": b"so"})
    _entry(src, "e" * 8, {"_liger_rms_norm_fwd.cubin": b"x"})            # a baseline's kernel
    _entry(src, "f" * 8, {"digest_kernel.cubin": b"x", "evil.so": b"x"})  # a harness name beside anything else
    (src / "stray.json").write_bytes(b"{}")
    assert seed_triton_cache(src, dst) == 4
    assert sorted(p.name for p in dst.iterdir()) == ["a" * 8, "b" * 8, "c" * 8, "d" * 8]
    assert (dst / ("a" * 8) / "_warmup_kernel.cubin").read_bytes() == b"\x7fELF"
    # Copies: what the host writes to its cache does not reach the trusted one.
    (dst / ("a" * 8) / "_warmup_kernel.cubin").write_bytes(b"forged")
    assert (src / ("a" * 8) / "_warmup_kernel.cubin").read_bytes() == b"\x7fELF"


def test_a_missing_trusted_cache_seeds_nothing(tmp_path: Path) -> None:
    assert seed_triton_cache(tmp_path / "none", tmp_path / "host") == 0
    assert not (tmp_path / "host").exists()


def test_the_seed_stops_at_its_size_limit(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import runner.sandbox as sandbox

    monkeypatch.setattr(sandbox, "SEED_MAX_BYTES", 150)
    src = tmp_path / "trusted"
    for i in range(3):
        _entry(src, f"k{i}", {"_warmup_kernel.cubin": b"x" * 100})
    assert seed_triton_cache(src, tmp_path / "host") == 1


_MARKING = """
import os, pathlib
_cache = pathlib.Path(os.environ["TRITON_CACHE_DIR"])
print("CACHE", _cache, "SEEN" if (_cache / "marker").exists() else "NEW",
      "TUNED-KEPT" if os.environ.get("TRITON_CACHE_AUTOTUNING") == "1" else "TUNED-AFRESH")
(_cache / "marker").write_text("compiled here")
"""


def _evaluate(path: Path, keep: bool | None):  # type: ignore[no-untyped-def]
    from runner.evaluate import EvalOptions, run_evaluation

    return run_evaluation("softmax", path, device="cpu", seed=7, hidden=False, timeout_s=120,
                          options=EvalOptions(tripwires=False, keep_triton_cache=keep))


@pytest.fixture
def fallback_root(monkeypatch):  # type: ignore[no-untyped-def]
    """As root the kept folders go under cuda_cache.FALLBACK_ROOT, which another uid's host must reach (pytest's
    tmp folder it cannot): a fresh one under /var/tmp, removed afterwards."""
    import shutil
    import uuid

    from runner import cuda_cache

    fallback = Path("/var/tmp") / f"d2kgrade-test-{uuid.uuid4().hex[:12]}"
    monkeypatch.setattr(cuda_cache, "FALLBACK_ROOT", fallback)
    yield fallback
    shutil.rmtree(fallback, ignore_errors=True)


@pytest.mark.usefixtures("fallback_root")
def test_a_source_s_host_cache_is_kept_and_only_that_source_sees_it(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from runner import cuda_cache

    monkeypatch.setenv("D2KGRADE_CACHE_DIR", str(tmp_path / "cache"))
    honest = (Path(__file__).parent / "honest" / "masked_one_pass.py").read_text()
    _entry(tmp_path / "cache" / "trusted" / "triton", "w" * 8, {"_warmup_kernel.cubin": b"\x7fELF"})
    one, other = tmp_path / "one.py", tmp_path / "other.py"
    one.write_text(honest + _MARKING)
    other.write_text(honest + _MARKING + "# another source\n")
    folder = cuda_cache.triton_dir(cuda_cache.source_hash(one.read_text()))

    first = _evaluate(one, True)
    assert first.status == "passed", first.message + first.log[-2000:]
    assert f"CACHE {folder} NEW TUNED-KEPT" in first.log  # the autotuner's choices are kept with the kernels
    assert (folder / "marker").read_text() == "compiled here"
    assert (folder / ("w" * 8) / "_warmup_kernel.cubin").read_bytes() == b"\x7fELF"  # seeded when made
    # A folder a host had may hold its links: the trusted side copies only into a folder it has just made.
    shutil.rmtree(folder / ("w" * 8))
    outside = tmp_path / "outside"
    outside.mkdir()
    (folder / ("w" * 8)).symlink_to(outside)
    second = _evaluate(one, True)
    assert second.status == "passed" and f"CACHE {folder} SEEN" in second.log
    assert list(outside.iterdir()) == []
    # Another source gets a folder of its own; without the option, a fresh one inside the job's temp folder.
    elsewhere = _evaluate(other, True)
    assert elsewhere.status == "passed" and "NEW" in elsewhere.log and str(folder) not in elsewhere.log
    fresh = _evaluate(one, False)
    assert fresh.status == "passed" and "NEW TUNED-AFRESH" in fresh.log and str(folder) not in fresh.log

