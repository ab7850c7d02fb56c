"""One version: the VERSION file's. The package and the sbt build read it; the C header and the JNI class state it
in their own languages, and must agree with it."""
import re
import subprocess
from pathlib import Path

import cloudprofiler as cp
import cloudprofiler.spark as cps
from cloudprofiler.native import ffi, lib

ROOT = Path(__file__).resolve().parent.parent
VERSION = (ROOT / "VERSION").read_text().strip()
MAJOR, MINOR, PATCH = (int(part) for part in VERSION.split("."))


def test_the_package_and_the_native_library_carry_the_version_file_s_version():
    assert cp.__version__ == VERSION
    header = (ROOT / "native" / "include" / "cloudprofiler.h").read_text()
    stated = {name: int(value) for name, value in re.findall(r"#define CP_VERSION_(MAJOR|MINOR|PATCH) (\d+)", header)}
    assert stated == {"MAJOR": MAJOR, "MINOR": MINOR, "PATCH": PATCH}
    assert ffi.string(lib.cp_version_string()).decode() == VERSION  # the library this package loads
    assert lib.cp_version() == MAJOR * 10000 + MINOR * 100 + PATCH


def test_the_jni_class_was_written_for_this_version():
    out = subprocess.run(["javap", "-constants", "-cp", cps.jar_path(), "io.cloudprofiler.CloudProfiler"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    (number,) = re.findall(r"int VERSION_NUMBER = (\d+);", out)
    assert int(number) == MAJOR * 10000 + MINOR * 100 + PATCH
