"""Benchmarks behind `cloudprofiler bench <target>`: each prints a table, or JSON with --json."""
from __future__ import annotations

from pathlib import Path


def native_program(name: str) -> Path:
    """A program of native/bench (cp_bench, cp_ret_end): the package's copy, else the source tree's build."""
    package = Path(__file__).resolve().parents[2]  # cloudprofiler/harness/bench/__init__.py
    for candidate in (package / "_lib" / name, package.parent.parent / "native" / "build" / name):
        if candidate.exists():
            return candidate
    raise SystemExit(f"{name} is not built: run `make build`")
