"""cffi builder (API mode) for `cloudprofiler._native`, linked against libcloudprofiler.so in `_lib/`.

Every `cdef/*.h` file is read as cdef text (core.h first: the others use its types), so each area of the
library declares its own functions.
"""
from pathlib import Path

from cffi import FFI

PACKAGE = Path(__file__).resolve().parent
ROOT = PACKAGE.parent.parent

ffibuilder = FFI()
CDEFS = sorted((PACKAGE / "cdef").glob("*.h"), key=lambda p: (p.name != "core.h", p.name))
ffibuilder.cdef("\n".join(p.read_text() for p in CDEFS))
ffibuilder.set_source(
    "cloudprofiler._native",
    '#include "cloudprofiler.h"',
    include_dirs=[str(ROOT / "native" / "include")],
    library_dirs=[str(PACKAGE / "_lib")],
    libraries=["cloudprofiler"],
    extra_link_args=["-Wl,-rpath,$ORIGIN/_lib"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
