"""The kernel host's Triton cache starts as a copy of the trusted cache's harness kernels (runner.sandbox)."""

from __future__ import annotations

from pathlib import Path

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
