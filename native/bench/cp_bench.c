/* Handler benchmark: ns per cp_log call for every handler from C (one thread, after a warm-up), then the
 * sustained rate of buffered identity with ZSTD to disk. Prints a table, or JSON with --json.
 *
 * Besides the wall-clock ns per call, each row gives the logging thread's own CPU time per call: on a machine
 * whose cores are shared, the wall figure also holds the time the compression and IO threads (or other
 * processes) took the core away. The encode+zstd row is the ceiling of one compression thread: ns per record
 * to encode one full block into a ZSTD record batch.
 *
 * With --open rules, each handler's channel is opened by rules (`bench=<handler>[:params]`, set before it opens)
 * instead of by handler, and only the TSC floor and the handler rows are printed: run beside --open direct with
 * CLOUDPROFILER_RULES naming a file, it gives what a channel that can switch at run time costs per call. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cloudprofiler.h"
#include "internal.h"

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }
static double cpu_s(void) { return clock_s(CLOCK_THREAD_CPUTIME_ID); }

static int by_rules; /* --open rules */

static void print_row(int json, int first, const char *handler, const char *tsc_read, double ns, double cpu_ns) {
  if (json)
    printf(
        "%s{\"handler\": \"%s\", \"caller\": \"c\", \"tsc_read\": \"%s\", \"opened\": \"%s\", "
        "\"ns_per_call\": %.3f, \"mrec_per_s\": %.3f, \"thread_cpu_ns_per_call\": %.3f}",
        first ? "" : ", ", handler, tsc_read, by_rules ? "rules" : "direct", ns, 1e3 / ns, cpu_ns);
  else printf("%-12s %-8s %-10s %12.2f %12.2f %14.2f\n", handler, "c", tsc_read, ns, 1e3 / ns, cpu_ns);
  fflush(stdout);
}

/* ns per record to encode full blocks of `rows` records into ZSTD record batches, as a compression thread does. */
static double encode_zstd_ns(uint32_t rows, int level) {
  int64_t *ids = malloc((size_t)rows * 8);
  uint64_t *tscs = malloc((size_t)rows * 8);
  if (!ids || !tscs) return 0;
  for (uint32_t i = 0; i < rows; i++) ids[i] = i, tscs[i] = cp_tsc();
  cp_buf out = {0};
  long long records = 0;
  double t0 = now_s();
  while (records < 4000000 || now_s() - t0 < 0.2) {
    cp__ipc_batch(&out, ids, tscs, rows, CP_COMPRESSION_ZSTD, level);
    records += rows;
  }
  double ns = (now_s() - t0) * 1e9 / (double)records;
  cp__buf_free(&out);
  free(ids);
  free(tscs);
  return ns;
}

/* The TSC read every record pays with the library's read (cp_tsc), as the floor of the record handlers. */
static void tsc_rows(int json, int first, const char *tsc_read, long long iterations) {
  volatile uint64_t sink = 0;
  double r0 = now_s(), c0 = cpu_s();
  for (long long i = 0; i < iterations; i++) sink += cp_tsc();
  print_row(json, first, "tsc-read", tsc_read, (now_s() - r0) * 1e9 / (double)iterations,
            (cpu_s() - c0) * 1e9 / (double)iterations);
}

/* The channel a handler row logs into: opened by handler, or (--open rules) by the one rule that names it. */
static cp_channel *open_bench_channel(cp_handler h, const int64_t *params, size_t n_params, cp_error *err) {
  if (!by_rules) return cp_channel_open("bench", h, params, n_params, NULL, NULL, 0, err);
  char rule[128];
  int at = snprintf(rule, sizeof rule, "bench=%s", cp_handler_name(h));
  for (size_t i = 0; i < n_params; i++)
    at += snprintf(rule + at, sizeof rule - (size_t)at, ":%lld", (long long)params[i]);
  if (cp_rules_set(rule, err)) return NULL;
  return cp_channel_open_by_rules("bench", NULL, NULL, 0, err);
}

static int handler_row(int json, cp_handler h, const int64_t *params, size_t n_params, const char *tsc_read,
                       long long iterations) {
  cp_error err;
  cp_channel *ch = open_bench_channel(h, params, n_params, &err);
  if (!ch) return fprintf(stderr, "cp_bench: %s\n", err.message), 1;
  long long n = h == CP_HANDLER_IDENTITY ? iterations / 10 : iterations;
  for (long long i = 0; i < n / 10; i++) cp_log(ch, i); /* warm-up: pages, blocks, caches */
  double t0 = now_s(), cpu0 = cpu_s();
  for (long long i = 0; i < n; i++) cp_log(ch, i);
  double elapsed = now_s() - t0, cpu = cpu_s() - cpu0;
  cp_channel_close(ch, NULL);
  print_row(json, 0, cp_handler_name(h), tsc_read, elapsed * 1e9 / (double)n, cpu * 1e9 / (double)n);
  return 0;
}

/* A whole-number flag value, or exits naming the flag and the bad value. */
static long long flag_number(const char *flag, const char *value, long long min) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(value, &end, 10);
  if (errno || !*value || *end || v < min) {
    fprintf(stderr, "cp_bench: %s %s is not valid: expected a whole number >= %lld\n", flag, value, min);
    exit(2);
  }
  return v;
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
  int only_handlers = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = 1;
    else if (!strcmp(argv[i], "--iterations") && i + 1 < argc)
      iterations = flag_number(argv[i], argv[i + 1], 1000), i++;
    else if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--open") && i + 1 < argc &&
             (!strcmp(argv[i + 1], "direct") || !strcmp(argv[i + 1], "rules")))
      by_rules = !strcmp(argv[++i], "rules"), only_handlers = 1;
    else if (!strcmp(argv[i], "--block-records") && i + 1 < argc)
      block_records = (uint32_t)flag_number(argv[i], argv[i + 1], 16), i++;
    else {
      fprintf(stderr, "usage: %s [--iterations N] [--block-records N] [--json] [--dir PATH] [--open direct|rules]\n",
              argv[0]);
      return 2;
    }
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

  struct {
    cp_handler h;
    int64_t params[2];
    size_t n;
  } cases[] = {
      {CP_HANDLER_NULL, {0}, 0},      {CP_HANDLER_SPC, {1000000}, 1}, {CP_HANDLER_MPC, {1000000}, 1},
      {CP_HANDLER_BUFFERED, {0}, 0},  {CP_HANDLER_XOY, {2, 1024}, 2}, {CP_HANDLER_DOWNSAMPLE, {64}, 1},
      {CP_HANDLER_FIRSTLAST, {0}, 0}, {CP_HANDLER_IDENTITY, {0}, 0},
  };
  if (json) printf("[");
  else
    printf("%-12s %-8s %-10s %12s %12s %14s\n", "handler", "caller", "tsc read", "ns/call", "M rec/s", "thread cpu ns");
  tsc_rows(json, 1, "ordered", iterations);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    if (handler_row(json, cases[c].h, cases[c].params, cases[c].n, "ordered", iterations)) return 1;
  if (only_handlers) {
    if (json) printf("]\n");
    cp_stop();
    if (own_dir) remove_tree(dir);
    return 0;
  }
  /* The same floor and the buffered handler again with the unordered read, side by side in this run. */
  cp_stop();
  o.tsc_read = CP_TSC_UNORDERED;
  if (cp_start(&o, &err)) return fprintf(stderr, "cp_bench: %s\n", err.message), 1;
  tsc_rows(json, 0, "unordered", iterations);
  if (handler_row(json, CP_HANDLER_BUFFERED, NULL, 0, "unordered", iterations)) return 1;
  o.tsc_read = CP_TSC_ORDERED;
  double encode_ns = encode_zstd_ns(block_records ? block_records : 65536, o.zstd_level);
  print_row(json, 0, "encode+zstd", "ordered", encode_ns, encode_ns);

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
    printf(
        ", {\"handler\": \"buffered+zstd\", \"caller\": \"c\", \"compression_ratio\": %.3f, "
        "\"sustained_mrec_per_s\": %.3f, \"records\": %llu, \"dropped\": %llu}]\n",
        ratio, rate, (unsigned long long)s.written, (unsigned long long)s.dropped);
  else
    printf("\nbuffered+zstd to disk: %.2f M records/s sustained, compression ratio %.2f (%llu records, %llu dropped)\n",
           rate, ratio, (unsigned long long)s.written, (unsigned long long)s.dropped);
  cp_stop();
  if (own_dir) remove_tree(dir);
  return 0;
}
