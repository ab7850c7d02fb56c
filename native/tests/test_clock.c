/* The clock: ordered TSC reads, paired readings and their uncertainty, the frequency estimate against
 * CLOCK_MONOTONIC_RAW, invariant-TSC detection against /proc/cpuinfo, and the TSC simulation (read once at
 * load, so each case runs in a child process started with the variable set). */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "check.h"
#include "cloudprofiler.h"

static int64_t monotonic_raw_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void readings(void) {
  uint64_t prev = cp_tsc();
  for (int i = 0; i < 1000; i++) {
    uint64_t t = cp_tsc();
    CHECK(t >= prev);
    prev = t;
  }
  uint32_t cpu = 99999;
  CHECK(cp_tscp(&cpu) > 0 && cpu < 4096 && cp_tscp(NULL) > 0);

  cp_error err;
  CHECK(cp_clock_read(NULL, &err) == EINVAL);
  cp_clock_reading r;
  int64_t before = monotonic_raw_ns();
  CHECK(cp_clock_read(&r, &err) == 0);
  int64_t after = monotonic_raw_ns();
  CHECK(r.monotonic_raw_ns >= before && r.monotonic_raw_ns <= after && r.realtime_ns > 1600000000000000000LL);
  cp_tsc_frequency f;
  CHECK(cp_tsc_frequency_get(&f, &err) == 0);
  CHECK(r.uncertainty_ticks > 0 && r.uncertainty_ticks < f.hz / 1000); /* under a millisecond */
}

/* Ticks over 100 ms of CLOCK_MONOTONIC_RAW agree with the estimate within its uncertainty plus the
 * measurement's own (a few microseconds of bracket at each end, generous on a loaded machine). */
static void frequency(void) {
  cp_tsc_frequency f, again;
  CHECK(cp_tsc_frequency_get(&f, NULL) == 0 && cp_tsc_frequency_get(&again, NULL) == 0);
  CHECK(f.hz == again.hz && f.uncertainty_hz > 0); /* cached */
  CHECK(f.source == CP_FREQUENCY_CPUID || f.source == CP_FREQUENCY_CALIBRATED);
  CHECK(f.hz > 1e8 && f.hz < 1e10 && f.uncertainty_hz < f.hz * 1e-3);
  cp_clock_reading a, b;
  CHECK(cp_clock_read(&a, NULL) == 0);
  struct timespec nap = {0, 100 * 1000 * 1000};
  while (nanosleep(&nap, &nap) == -1 && errno == EINTR) {
  }
  CHECK(cp_clock_read(&b, NULL) == 0);
  double measured = (double)(b.tsc - a.tsc) / ((double)(b.monotonic_raw_ns - a.monotonic_raw_ns) / 1e9);
  double slack = f.uncertainty_hz +
                 measured * ((double)(a.uncertainty_ticks + b.uncertainty_ticks) / (double)(b.tsc - a.tsc)) +
                 measured * 2e-4;
  if (!(measured > f.hz - slack && measured < f.hz + slack))
    fprintf(stderr, "measured %.0f Hz, estimate %.0f +- %.0f Hz\n", measured, f.hz, f.uncertainty_hz);
  CHECK(measured > f.hz - slack && measured < f.hz + slack);
}

static void invariant(void) {
  FILE *fp = fopen("/proc/cpuinfo", "r");
  CHECK(fp);
  char line[8192];
  int constant = 0, nonstop = 0;
  while (fgets(line, sizeof line, fp))
    if (!strncmp(line, "flags", 5)) {
      constant = strstr(line, " constant_tsc") != NULL;
      nonstop = strstr(line, " nonstop_tsc") != NULL;
      break;
    }
  fclose(fp);
  /* Linux sets both flags when CPUID 0x80000007 reports the invariant TSC (and constant_tsc also for some
   * CPU families without it), so the CPUID bit implies both flags. */
  CHECK(!cp_tsc_is_invariant() || (constant && nonstop));
  cp_error err;
  CHECK(cp_require_invariant_tsc(1, &err) == 0);
  int rc = cp_require_invariant_tsc(0, &err);
  CHECK(cp_tsc_is_invariant() ? rc == 0 : rc == ENOTSUP && strstr(err.message, "force"));
}

/* Child: checks cp_tsc() against the raw counter for the simulation given in argv. */
static int simulated_child(const char *offset_s, const char *skew_ppt_s) {
  int64_t offset = strtoll(offset_s, NULL, 10), skew_ppt = strtoll(skew_ppt_s, NULL, 10);
  for (int i = 0; i < 1000; i++) {
    uint64_t raw0 = __rdtsc();
    uint64_t sim = cp_tsc();
    uint64_t raw1 = __rdtsc();
    /* sim(t) = t + offset + floor(t * skew / 1e12) is monotonic, so it lies between sim(raw0) and sim(raw1) */
    __int128 lo = (__int128)raw0 + offset + ((__int128)raw0 * skew_ppt) / 1000000000000LL - 1;
    __int128 hi = (__int128)raw1 + offset + ((__int128)raw1 * skew_ppt) / 1000000000000LL + 1;
    if ((__int128)sim < lo || (__int128)sim > hi) {
      fprintf(stderr, "simulated tsc %" PRIu64 " outside [%" PRIu64 ", %" PRIu64 "]\n", sim, (uint64_t)lo,
              (uint64_t)hi);
      return 1;
    }
  }
  uint32_t cpu;
  uint64_t raw = __rdtsc(), simp = cp_tscp(&cpu);
  if (skew_ppt == 0 && offset > 0 && simp < raw + (uint64_t)offset) return 1;
  if (strstr(getenv("CLOUDPROFILER_SIMULATE_TSC"), "invariant=0")) { /* a CPU without an invariant TSC */
    cp_error err;
    if (cp_tsc_is_invariant() || cp_require_invariant_tsc(0, &err) != ENOTSUP || cp_require_invariant_tsc(1, &err))
      return 2;
  }
  return 0;
}

static int run_child(const char *self, const char *spec, const char *offset, const char *skew_ppt,
                     const char *err_file) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    setenv("CLOUDPROFILER_SIMULATE_TSC", spec, 1);
    if (err_file && !freopen(err_file, "w", stderr)) _exit(3);
    execl(self, self, "--simulated", offset, skew_ppt, (char *)NULL);
    _exit(4);
  }
  int status;
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
  return WEXITSTATUS(status);
}

static void simulation(const char *self) {
  CHECK(run_child(self, "offset=36000000000000,skew_ppm=-25.5", "36000000000000", "-25500000", NULL) == 0);
  CHECK(run_child(self, "offset=-1000,skew_ppm=1000", "-1000", "1000000000", NULL) == 0);
  CHECK(run_child(self, "skew_ppm=0.000001", "0", "1", NULL) == 0);
  CHECK(run_child(self, "offset=7,invariant=0", "7", "0", NULL) == 0);
  /* The check itself can fail: a child told the wrong offset notices. */
  CHECK(run_child(self, "offset=5000000000", "0", "0", "/dev/null") == 1);
  /* Malformed: one line on stderr that names the value, simulation off. */
  char err_file[] = "/tmp/cp_test_clock.XXXXXX";
  int fd = mkstemp(err_file);
  CHECK(fd >= 0);
  close(fd);
  CHECK(run_child(self, "offset=12x,skew_ppm=1", "0", "0", err_file) == 0);
  FILE *fp = fopen(err_file, "r");
  char line[512] = "";
  CHECK(fp && fgets(line, sizeof line, fp));
  fclose(fp);
  unlink(err_file);
  CHECK(strstr(line, "CLOUDPROFILER_SIMULATE_TSC=offset=12x,skew_ppm=1") && strstr(line, "expected"));
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--simulated")) return simulated_child(argv[2], argv[3]);
  readings();
  frequency();
  invariant();
  simulation(argv[0]);
  puts("test_clock: ok");
  return 0;
}
