/* TSC reads, paired clock readings, invariant-TSC detection, frequency, and the TSC simulation. */
#include <cpuid.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#include "internal.h"

cp_simulation cp__simulation;
bool cp__tsc_unordered;
static char simulation_json[128] = "null";

uint64_t cp_tsc(void) { return cp__tsc(); }

uint64_t cp_tscp(uint32_t *cpu_id) {
  unsigned int aux;
  uint64_t tsc = __rdtscp(&aux);
  if (cpu_id) *cpu_id = aux & 0xfff; /* Linux puts the CPU number in the low 12 bits of TSC_AUX */
  if (CP_UNLIKELY(cp__simulation.enabled)) return cp__simulate(tsc);
  return tsc;
}

const char *cp_tsc_simulation(void) { return simulation_json; }

__attribute__((constructor)) static void read_simulation(void) {
  const char *spec = getenv("CLOUDPROFILER_SIMULATE_TSC");
  if (!spec || !*spec) return;
  long long offset = 0;
  double skew_ppm = 0;
  bool not_invariant = false;
  char *copy = strdup(spec), *save = NULL;
  bool ok = copy != NULL;
  for (char *item = copy ? strtok_r(copy, ",", &save) : NULL; ok && item; item = strtok_r(NULL, ",", &save)) {
    char *end = NULL;
    if (strncmp(item, "offset=", 7) == 0) {
      errno = 0;
      offset = strtoll(item + 7, &end, 10);
      ok = errno == 0 && *end == '\0' && end != item + 7;
    } else if (strncmp(item, "skew_ppm=", 9) == 0) {
      skew_ppm = strtod(item + 9, &end);
      ok = *end == '\0' && end != item + 9 && fabs(skew_ppm) < 1e5;
    } else if (strcmp(item, "invariant=0") == 0) {
      not_invariant = true;
    } else {
      ok = false;
    }
  }
  free(copy);
  if (!ok) {
    fprintf(stderr,
            "cloudprofiler: ignoring CLOUDPROFILER_SIMULATE_TSC=%s: expected offset=<ticks>,skew_ppm=<number>"
            "[,invariant=0]\n",
            spec);
    return;
  }
  long long skew_ppt = llround(skew_ppm * 1e6);
  uint64_t now = __rdtsc();
  if ((__int128)now + offset + (__int128)now * skew_ppt / 1000000000000LL < 0) {
    /* a TSC counts up from zero at boot: a host "booted later" than this one by more than its uptime cannot
       exist, and its values would wrap around to 2^64 */
    fprintf(stderr,
            "cloudprofiler: ignoring CLOUDPROFILER_SIMULATE_TSC=%s: offset=%lld would put the TSC below zero "
            "(this machine's TSC is %llu)\n",
            spec, offset, (unsigned long long)now);
    return;
  }
  cp__simulation.offset = offset;
  cp__simulation.skew_ppt = skew_ppt;
  cp__simulation.not_invariant = not_invariant;
  snprintf(simulation_json, sizeof simulation_json, "{\"offset\": %lld, \"skew_ppm\": %.6f, \"invariant\": %s}", offset,
           (double)cp__simulation.skew_ppt / 1e6, not_invariant ? "false" : "true");
  cp__simulation.enabled = true;
}

static int64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int cp_clock_read(cp_clock_reading *out, cp_error *error) {
  if (!out) return cp__fail(error, EINVAL, "cp_clock_read: out is NULL");
  cp_clock_reading best = {0};
  uint64_t best_width = UINT64_MAX;
  for (int i = 0; i < 8; i++) {
    uint32_t cpu0, cpu1;
    uint64_t t0 = cp_tscp(&cpu0);
    int64_t mono = clock_ns(CLOCK_MONOTONIC_RAW);
    int64_t real = clock_ns(CLOCK_REALTIME);
    uint64_t t1 = cp_tscp(&cpu1);
    if (cpu0 != cpu1 || t1 < t0) continue; /* migrated between the reads: the bracket means nothing */
    if (t1 - t0 < best_width) {
      best_width = t1 - t0;
      best = (cp_clock_reading){t0 + (t1 - t0) / 2, mono, real, (t1 - t0 + 1) / 2, cpu0};
    }
  }
  if (best_width == UINT64_MAX) return cp__fail(error, EAGAIN, "cp_clock_read: the thread kept migrating between CPUs");
  *out = best;
  return 0;
}

int cp_tsc_is_invariant(void) {
  if (cp__simulation.not_invariant) return 0;
  unsigned int a, b, c, d;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return 0;
  __get_cpuid(0x80000007u, &a, &b, &c, &d);
  return (d >> 8) & 1;
}

int cp_require_invariant_tsc(int force, cp_error *error) {
  if (force || cp_tsc_is_invariant()) return 0;
  return cp__fail(error, ENOTSUP,
                  "this CPU does not report an invariant TSC (constant_tsc and nonstop_tsc), so TSC values of "
                  "different nodes cannot be related; pass force to measure anyway");
}

static int calibrate(cp_tsc_frequency *out, cp_error *error) {
  cp_clock_reading a, b;
  int rc = cp_clock_read(&a, error);
  if (rc) return rc;
  struct timespec nap = {0, 50 * 1000 * 1000};
  while (nanosleep(&nap, &nap) == -1 && errno == EINTR) {
  }
  if ((rc = cp_clock_read(&b, error))) return rc;
  double seconds = (double)(b.monotonic_raw_ns - a.monotonic_raw_ns) / 1e9;
  double ticks = (double)(b.tsc - a.tsc);
  if (seconds <= 0 || ticks <= 0) return cp__fail(error, EIO, "TSC frequency calibration saw no time pass");
  out->hz = ticks / seconds;
  /* each TSC midpoint is within its bracket; each clock reading within 1 ns */
  out->uncertainty_hz = out->hz * ((double)(a.uncertainty_ticks + b.uncertainty_ticks) / ticks + 2e-9 / seconds);
  out->source = CP_FREQUENCY_CALIBRATED;
  return 0;
}

int cp_tsc_frequency_get(cp_tsc_frequency *out, cp_error *error) {
  static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  static cp_tsc_frequency cached;
  static bool have;
  if (!out) return cp__fail(error, EINVAL, "cp_tsc_frequency_get: out is NULL");
  pthread_mutex_lock(&mutex);
  int rc = 0;
  if (!have) {
    unsigned int a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_max(0, NULL) >= 0x15 && __get_cpuid(0x15, &a, &b, &c, &d) && a && b && c) {
      cached.hz = (double)c * b / a;
      cached.uncertainty_hz = cached.hz * 100e-6; /* crystals are specified to about 100 ppm */
      cached.source = CP_FREQUENCY_CPUID;
      if (cp__simulation.enabled) { /* calibration measures simulated ticks already; the crystal does not */
        double scale = 1.0 + (double)cp__simulation.skew_ppt / 1e12;
        cached.hz *= scale;
        cached.uncertainty_hz *= scale;
      }
    } else {
      rc = calibrate(&cached, error);
    }
    have = rc == 0;
  }
  if (!rc) *out = cached;
  pthread_mutex_unlock(&mutex);
  return rc;
}
