"""Wall-clock steps do not touch results: calibration, translation, timeouts and the TSC frequency read only the
TSC and CLOCK_MONOTONIC(_RAW). Both peers run under an LD_PRELOAD stand-in for clock_gettime, gettimeofday and
time that steps CLOCK_REALTIME by hours, forwards and backwards, between any two reads, so any use of the wall
clock in a computation would be off by hours. The host clock is never touched."""
import json
import subprocess

import pytest

from conftest import run_python
from test_probe import check_containment, run_rounds, start_responder

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/time.h>
#include <time.h>

static atomic_long reads;

/* Read n is moved by +n h (odd n) or -n h (even n), n modulo 1000: any two reads are hours apart, forwards and
 * backwards. */
static long step_s(void) {
  long n = atomic_fetch_add(&reads, 1) % 1000;
  return (n & 1 ? n : -n) * 3600;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
  static int (*real)(clockid_t, struct timespec *);
  if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
  int rc = real(id, ts);
  if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE || id == CLOCK_TAI)) ts->tv_sec += step_s();
  return rc;
}

int gettimeofday(struct timeval *tv, void *tz) {
  struct timespec ts;
  int rc = clock_gettime(CLOCK_REALTIME, &ts);
  if (rc == 0 && tv) tv->tv_sec = ts.tv_sec, tv->tv_usec = ts.tv_nsec / 1000;
  (void)tz;
  return rc;
}

time_t time(time_t *out) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (out) *out = ts.tv_sec;
  return ts.tv_sec;
}
"""


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wall-clock")
    (folder / "step.c").write_text(SHIM)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(folder / "step.so"), str(folder / "step.c"), "-ldl"],
                   check=True, capture_output=True, text=True)
    return folder / "step.so"


def test_the_stand_in_really_steps_the_wall_clock_of_a_process(shim):
    result = run_python(
        """
        import json, time
        import cloudprofiler as cp
        reads = [cp.clock_read() for _ in range(4)]
        print(json.dumps({"time": [time.time() for _ in range(4)], "real": [r.realtime_ns for r in reads],
                          "raw": [r.monotonic_raw_ns for r in reads]}))
        """,
        env={"LD_PRELOAD": str(shim)},
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert min(abs(b - a) for a, b in zip(seen["time"], seen["time"][1:])) > 3000  # seconds: hours apart
    assert min(abs(b - a) for a, b in zip(seen["real"], seen["real"][1:])) > 3000e9  # the library's reads too
    assert all(0 < b - a < 1e9 for a, b in zip(seen["raw"], seen["raw"][1:]))  # the raw clock is untouched


def _calibrate(prefix):
    proc, port = start_responder("127.0.0.1", prefix)
    try:
        rounds = run_rounds("127.0.0.1", port, 4, 0.3, prefix)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    return check_containment(rounds)


def test_calibration_and_translation_are_the_same_with_a_stepping_wall_clock(shim):
    plain = _calibrate(())
    stepping = _calibrate(("env", f"LD_PRELOAD={shim}"))
    # every translated value held its truth inside its bound (check_containment), and the bounds stayed as tight:
    # a bound that used the wall clock would be hours wide
    for method in ("minrtt", "minpair"):
        assert stepping[method] <= 3 * plain[method] + 20_000, (method, plain, stepping)


def test_the_tsc_frequency_and_log_files_ignore_the_wall_clock(shim, tmp_path):
    code = f"""
        import json, cloudprofiler as cp
        cp.start({str(tmp_path)!r})
        with cp.Channel("steps", "buffered") as ch:
            for i in range(1000):
                ch.log(i)
        meta = cp.log_metadata(ch.path)
        f = cp.tsc_frequency()
        print(json.dumps({{"hz": f.hz, "unc": f.uncertainty_hz, "open": meta["open.clock"],
                           "close": meta["close.clock"], "rows": cp.read_log(ch.path).num_rows}}))
        """
    plain = run_python(code.replace(str(tmp_path), str(tmp_path / "plain")))
    stepping = run_python(code.replace(str(tmp_path), str(tmp_path / "stepping")), env={"LD_PRELOAD": str(shim)})
    assert plain.returncode == 0 and stepping.returncode == 0, plain.stderr + stepping.stderr
    a, b = json.loads(plain.stdout), json.loads(stepping.stdout)
    assert abs(a["hz"] - b["hz"]) <= a["unc"] + b["unc"] + 1  # the frequency does not see the steps
    assert a["rows"] == b["rows"] == 1000
    # the files keep the wall clock as read (it stepped), next to the TSC and the raw clock that did not
    assert b["close"]["tsc"] > b["open"]["tsc"] and b["close"]["monotonic_raw_ns"] > b["open"]["monotonic_raw_ns"]
    elapsed_ns = (b["close"]["tsc"] - b["open"]["tsc"]) / b["hz"] * 1e9
    assert abs((b["close"]["monotonic_raw_ns"] - b["open"]["monotonic_raw_ns"]) - elapsed_ns) < 5e6
