"""The rules CI holds the suite to (CLOUDPROFILER_TESTS_REQUIRE_ALL=1, set by .ci/run): nothing it stands for may skip
quietly, whether a test skips as it runs or a whole module as it is collected, and the C style check does not pass for
want of its tool."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLAG = {"CLOUDPROFILER_TESTS_REQUIRE_ALL": "1"}


def _pytest(folder: Path, flag: bool) -> subprocess.CompletedProcess:
    shutil.copy(ROOT / "tests" / "conftest.py", folder)
    env = {**os.environ, **FLAG} if flag else {k: v for k, v in os.environ.items() if k not in FLAG}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_needs_a_client.py"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def test_a_module_that_skips_at_collection_fails_under_the_flag(tmp_path):
    (tmp_path / "test_needs_a_client.py").write_text(
        "import pytest\npytest.importorskip('cloudprofiler_no_such_client')\n\n\ndef test_it():\n    pass\n")
    quiet = _pytest(tmp_path, flag=False)
    # a skip, as a machine without the client has it (5: pytest's "no tests collected")
    assert quiet.returncode == 5 and "1 skipped" in quiet.stdout, quiet.stdout + quiet.stderr
    failed = _pytest(tmp_path, flag=True)
    assert failed.returncode != 0 and "skipped where CI expects it to run" in failed.stdout, failed.stdout


def test_the_c_format_check_fails_under_the_flag_without_clang_format(tmp_path):
    for tool in ("make", "sh", "cc"):  # a PATH with everything make needs but clang-format
        (tmp_path / tool).symlink_to(shutil.which(tool))
    env = {"PATH": str(tmp_path), "HOME": os.environ.get("HOME", "/")}
    run = [str(tmp_path / "make"), "-s", "-C", str(ROOT / "native"), "format-check"]
    assert subprocess.run(run, env=env, capture_output=True, text=True).returncode == 0
    failed = subprocess.run(run, env={**env, **FLAG}, capture_output=True, text=True)
    assert failed.returncode != 0 and "clang-format is missing" in failed.stderr, failed
