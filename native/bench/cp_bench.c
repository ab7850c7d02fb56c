/* Handler benchmark: ns per cp_log call for every handler from C (one thread, after a warm-up), then the
 * sustained rate of buffered identity with ZSTD to disk. Prints a table, or JSON with --json. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cloudprofiler.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') snprintf(path, sizeof path, "%s/%s", dir, e->d_name), unlink(path);
  closedir(d);
  rmdir(dir);
}

int main(int argc, char **argv) {
  long long iterations = 20000000;
  int json = 0;
  uint32_t block_records = 0;
  const char *dir = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = 1;
    else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) iterations = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--block-records") && i + 1 < argc) block_records = (uint32_t)atol(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--iterations N] [--block-records N] [--json] [--dir PATH]\n", argv[0]);
      return 2;
    }
  }
  if (iterations < 1000) {
    fprintf(stderr, "cp_bench: --iterations %lld is too small: expected at least 1000\n", iterations);
    return 2;
  }
  char tmp[] = "/tmp/cp_bench.XXXXXX";
  int own_dir = dir == NULL;
  if (own_dir && !(dir = mkdtemp(tmp))) return perror("mkdtemp"), 1;

  cp_options o;
  cp_options_init(&o);
  o.log_dir = dir;
  o.block_records = block_records;
  cp_error err;
  if (cp_start(&o, &err)) return fprintf(stderr, "cp_bench: %s\n", err.message), 1;

  struct { cp_handler h; int64_t params[2]; size_t n; } cases[] = {
      {CP_HANDLER_NULL, {0}, 0},         {CP_HANDLER_SPC, {1000000}, 1}, {CP_HANDLER_MPC, {1000000}, 1},
      {CP_HANDLER_BUFFERED, {0}, 0},     {CP_HANDLER_XOY, {2, 1024}, 2}, {CP_HANDLER_DOWNSAMPLE, {64}, 1},
      {CP_HANDLER_FIRSTLAST, {0}, 0},    {CP_HANDLER_IDENTITY, {0}, 0},
  };
  if (json) printf("[");
  else printf("%-12s %-8s %12s %12s\n", "handler", "caller", "ns/call", "M rec/s");
  /* The ordered TSC read every record pays, as the floor of the record handlers. */
  volatile uint64_t sink = 0;
  double r0 = now_s();
  for (long long i = 0; i < iterations; i++) sink += cp_tsc();
  double tsc_ns = (now_s() - r0) * 1e9 / (double)iterations;
  if (json) printf("{\"handler\": \"tsc-read\", \"caller\": \"c\", \"ns_per_call\": %.3f, \"mrec_per_s\": %.3f}, ", tsc_ns, 1e3 / tsc_ns);
  else printf("%-12s %-8s %12.2f %12.2f\n", "tsc-read", "c", tsc_ns, 1e3 / tsc_ns);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    cp_channel *ch = cp_channel_open("bench", cases[c].h, cases[c].params, cases[c].n, NULL, NULL, 0, &err);
    if (!ch) return fprintf(stderr, "cp_bench: %s\n", err.message), 1;
    long long n = cases[c].h == CP_HANDLER_IDENTITY ? iterations / 10 : iterations;
    for (long long i = 0; i < n / 10; i++) cp_log(ch, i); /* warm-up: pages, blocks, caches */
    double t0 = now_s();
    for (long long i = 0; i < n; i++) cp_log(ch, i);
    double elapsed = now_s() - t0;
    cp_channel_close(ch, NULL);
    double ns = elapsed * 1e9 / (double)n;
    if (json) printf("%s{\"handler\": \"%s\", \"caller\": \"c\", \"ns_per_call\": %.3f, \"mrec_per_s\": %.3f}", c ? ", " : "",
                     cp_handler_name(cases[c].h), ns, 1e3 / ns);
    else printf("%-12s %-8s %12.2f %12.2f\n", cp_handler_name(cases[c].h), "c", ns, 1e3 / ns);
    fflush(stdout);
  }

  /* Sustained: log, then flush and close; the rate counts the time until everything is on disk. */
  cp_stop();
  o.compression = CP_COMPRESSION_ZSTD;
  if (cp_start(&o, &err)) return fprintf(stderr, "cp_bench: %s\n", err.message), 1;
  cp_channel *ch = cp_channel_open("bench-zstd", CP_HANDLER_BUFFERED, NULL, 0, NULL, NULL, 0, &err);
  if (!ch) return fprintf(stderr, "cp_bench: %s\n", err.message), 1;
  double t0 = now_s();
  for (long long i = 0; i < iterations; i++) cp_log(ch, i);
  cp_channel_close(ch, NULL);
  double elapsed = now_s() - t0;
  cp_channel_stats s;
  cp_channel_stats_get(ch, &s, NULL);
  double ratio = (double)s.written * 16.0 / (double)s.bytes_written;
  double rate = (double)s.written / elapsed / 1e6;
  if (json)
    printf(", {\"handler\": \"buffered+zstd\", \"caller\": \"c\", \"compression_ratio\": %.3f, "
           "\"sustained_mrec_per_s\": %.3f, \"records\": %llu, \"dropped\": %llu}]\n",
           ratio, rate, (unsigned long long)s.written, (unsigned long long)s.dropped);
  else
    printf("\nbuffered+zstd to disk: %.2f M records/s sustained, compression ratio %.2f (%llu records, %llu dropped)\n",
           rate, ratio, (unsigned long long)s.written, (unsigned long long)s.dropped);
  cp_stop();
  if (own_dir) remove_tree(dir);
  return 0;
}
