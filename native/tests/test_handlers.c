/* Handlers, read back from their files: what each keeps, counters that sum to the calls, the flush-interval
 * timer and the hand-off at thread exit, both full policies (every record written or counted as dropped),
 * records a full disk refused counted as dropped, ZSTD files, and records logged at a TSC read earlier. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "cloudprofiler.h"
#include "failing_fd.h"
#include "ipc_read.h"

static cp_channel *open_or_die(const char *name, cp_handler h, const int64_t *params, size_t n) {
  cp_error err;
  cp_channel *ch = cp_channel_open(name, h, params, n, NULL, NULL, 0, &err);
  if (!ch) fprintf(stderr, "%s\n", err.message);
  CHECK(ch);
  return ch;
}

/* A count in the footer: the number and nothing else (no padding). */
static uint64_t footer_count(const ipc_file *f, const char *key) {
  char *end;
  uint64_t v = strtoull(ipc_footer_meta(f, key), &end, 10);
  CHECK(*end == '\0');
  return v;
}

/* Closes the channel and reads its file: a footer that lists every batch, the final counts in both schemas. */
static void close_and_read(cp_channel *ch, ipc_file *f) {
  cp_error err;
  CHECK(cp_channel_close(ch, &err) == 0);
  int rc = ipc_read(cp_channel_path(ch), f);
  if (rc) fprintf(stderr, "%s\n", f->error);
  CHECK(rc == 0 && f->eos && f->footer);
  cp_channel_stats s;
  CHECK(cp_channel_stats_get(ch, &s, &err) == 0 && s.written == f->rows);
  CHECK(strtoull(ipc_meta(f, "records.written"), NULL, 10) == f->rows);
  CHECK(strtoull(ipc_meta(f, "records.logged"), NULL, 10) == s.logged);
  CHECK(strtoull(ipc_meta(f, "records.dropped"), NULL, 10) == s.dropped);
  CHECK(footer_count(f, "records.written") == f->rows && footer_count(f, "records.logged") == s.logged);
  CHECK(footer_count(f, "records.dropped") == s.dropped);
  CHECK(!strcmp(ipc_meta(f, "closed"), "true ") && !strcmp(ipc_footer_meta(f, "closed"), "true"));
}

static int64_t floor_mod(int64_t a, int64_t m) { return ((a % m) + m) % m; }

static void xoy(void) {
  int64_t p[2] = {2, 5};
  cp_channel *ch = open_or_die("xoy", CP_HANDLER_XOY, p, 2);
  int64_t ids[100];
  for (int i = 0; i < 100; i++) ids[i] = i - 50;
  cp_log_many(ch, ids, 50);
  for (int i = 50; i < 100; i++) cp_log(ch, ids[i]);
  cp_error err;
  CHECK(cp_channel_parameterize(ch, 1, 0, &err) == EINVAL && strstr(err.message, "y=0"));
  CHECK(cp_channel_parameterize(ch, 0, 6, &err) == EINVAL && strstr(err.message, "x=6"));
  CHECK(cp_channel_parameterize(ch, 2, 1, &err) == EINVAL && strstr(err.message, "index 2"));
  CHECK(cp_channel_parameterize(ch, 0, 0, &err) == 0); /* keep nothing from here on */
  for (int i = 0; i < 100; i++) cp_log(ch, i);
  ipc_file f;
  close_and_read(ch, &f);
  size_t k = 0;
  for (int i = 0; i < 100; i++)
    if (floor_mod(ids[i], 5) < 2) CHECK(k < f.rows && f.col0[k++] == ids[i]);
  CHECK(k == f.rows && f.rows == 40);
  CHECK(!strncmp(ipc_meta(&f, "handler.params"), "[0, 5]", 6));
  ipc_free(&f);
}

static void downsample(void) {
  int64_t n = 7;
  cp_channel *ch = open_or_die("downsample", CP_HANDLER_DOWNSAMPLE, &n, 1);
  for (int i = 0; i < 100; i++) cp_log(ch, 1000 + i);
  ipc_file f;
  close_and_read(ch, &f);
  CHECK(f.rows == 15);
  for (size_t i = 0; i < f.rows; i++) CHECK(f.col0[i] == 1000 + 7 * (int64_t)i);
  ipc_free(&f);
}

static cp_channel *firstlast_channel;
static void *log_firstlast(void *arg) {
  for (int i = 0; i < 1000; i++) cp_log(firstlast_channel, (intptr_t)arg * 1000 + i);
  return NULL;
}

static void firstlast(void) {
  ipc_file f;
  cp_channel *none = open_or_die("firstlast-none", CP_HANDLER_FIRSTLAST, NULL, 0);
  close_and_read(none, &f);
  CHECK(f.rows == 0);
  ipc_free(&f);
  cp_channel *one = open_or_die("firstlast-one", CP_HANDLER_FIRSTLAST, NULL, 0);
  cp_log(one, 42);
  close_and_read(one, &f);
  CHECK(f.rows == 1 && f.col0[0] == 42);
  ipc_free(&f);

  /* Threads one after another: the first record is thread 0's first, the last is thread 2's last. */
  firstlast_channel = open_or_die("firstlast", CP_HANDLER_FIRSTLAST, NULL, 0);
  for (intptr_t k = 0; k < 3; k++) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, log_firstlast, (void *)k) == 0);
    pthread_join(t, NULL);
  }
  close_and_read(firstlast_channel, &f);
  CHECK(f.rows == 2 && f.col0[0] == 0 && f.col0[1] == 2999 && f.col1[0] < f.col1[1]);
  ipc_free(&f);
}

/* The first and last record meet a full disk at the close: the close says so and counts them as dropped. */
static void firstlast_disk_full(void) {
  cp_channel *ch = open_or_die("firstlast-full", CP_HANDLER_FIRSTLAST, NULL, 0);
  for (int i = 0; i < 10; i++) cp_log(ch, i);
  CHECK(fill_disk_under(cp_channel_path(ch)) > 0);
  cp_error err;
  CHECK(cp_channel_close(ch, &err) == ENOSPC && strstr(err.message, cp_channel_path(ch)));
  cp_channel_stats s;
  CHECK(cp_channel_stats_get(ch, &s, &err) == 0 && s.logged == 10);
  CHECK(s.kept == 2 && s.written == 0 && s.dropped == 2);
}

static void null_and_identity(void) {
  cp_channel *null = open_or_die("null", CP_HANDLER_NULL, NULL, 0);
  for (int i = 0; i < 1000; i++) cp_log(null, i);
  ipc_file f;
  close_and_read(null, &f);
  cp_channel_stats s;
  CHECK(cp_channel_stats_get(null, &s, NULL) == 0 && s.logged == 1000 && f.rows == 0);
  ipc_free(&f);

  cp_channel *id = open_or_die("identity", CP_HANDLER_IDENTITY, NULL, 0);
  for (int i = 0; i < 3000; i++) cp_log(id, i);
  CHECK(cp_channel_flush(id, NULL) == 0);
  CHECK(ipc_read(cp_channel_path(id), &f) == 0 && f.rows == 3000 && f.batches == 3); /* 1024 + 1024 + 952 */
  ipc_free(&f);
  cp_log(id, 3000);
  close_and_read(id, &f);
  CHECK(f.rows == 3001 && f.batches == 4);
  for (size_t i = 0; i < f.rows; i++) CHECK(f.col0[i] == (int64_t)i && (!i || f.col1[i] >= f.col1[i - 1]));
  ipc_free(&f);
}

/* cp_log_at: the record keeps the TSC the caller read, through the handler's own choice of what to keep. */
static void log_at(void) {
  cp_channel *buffered = open_or_die("at-buffered", CP_HANDLER_BUFFERED, NULL, 0);
  uint64_t earlier = cp_tsc();
  cp_log(buffered, 1);
  cp_log_at(buffered, 0, earlier);
  ipc_file f;
  close_and_read(buffered, &f);
  CHECK(f.rows == 2 && f.col0[0] == 1 && f.col0[1] == 0 && f.col1[1] == earlier && f.col1[0] > f.col1[1]);
  ipc_free(&f);
  cp_log_at(buffered, 2, earlier); /* closed: counted, not written */
  cp_channel_stats s;
  CHECK(cp_channel_stats_get(buffered, &s, NULL) == 0 && s.logged == 2 && s.after_close == 1);

  int64_t p[2] = {1, 2};
  cp_channel *xoy = open_or_die("at-xoy", CP_HANDLER_XOY, p, 2);
  for (int64_t i = 0; i < 10; i++) cp_log_at(xoy, i, 1000 + (uint64_t)i);
  close_and_read(xoy, &f);
  CHECK(f.rows == 5);
  for (size_t i = 0; i < f.rows; i++) CHECK(f.col0[i] == 2 * (int64_t)i && f.col1[i] == 1000 + 2 * (uint64_t)i);
  ipc_free(&f);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

static cp_channel *mpc_channel;
static void *log_mpc(void *arg) {
  (void)arg;
  for (int i = 0; i < 100000; i++) cp_log(mpc_channel, i);
  return NULL;
}

/* Counts per period add up to the calls; periods start in increasing order at least a period apart. */
static void check_counter_file(cp_channel *ch, uint64_t calls) {
  ipc_file f;
  close_and_read(ch, &f);
  CHECK(!strcmp(f.schema.field0, "period_start_tsc") && !strcmp(f.schema.field1, "count") && f.rows >= 1);
  cp_tsc_frequency freq;
  CHECK(cp_tsc_frequency_get(&freq, NULL) == 0);
  uint64_t sum = 0, period_ticks = (uint64_t)(freq.hz / 1000 * 0.99);
  for (size_t i = 0; i < f.rows; i++) {
    sum += f.col1[i];
    if (i) CHECK((uint64_t)f.col0[i] >= (uint64_t)f.col0[i - 1] + period_ticks);
  }
  CHECK(sum == calls);
  ipc_free(&f);
}

static void counters(void) {
  int64_t period = 1000000; /* 1 ms */
  cp_channel *spc = open_or_die("spc", CP_HANDLER_SPC, &period, 1);
  for (int i = 0; i < 1000; i++) cp_log(spc, i);
  sleep_ms(5);
  for (int i = 0; i < 500; i++) cp_log(spc, i);
  check_counter_file(spc, 1500);

  mpc_channel = open_or_die("mpc", CP_HANDLER_MPC, &period, 1);
  pthread_t t[4];
  for (int k = 0; k < 4; k++) CHECK(pthread_create(&t[k], NULL, log_mpc, NULL) == 0);
  for (int k = 0; k < 4; k++) pthread_join(t[k], NULL);
  check_counter_file(mpc_channel, 400000);

  cp_error err;
  int64_t bad = 999;
  CHECK(!cp_channel_open("spc", CP_HANDLER_SPC, &bad, 1, NULL, NULL, 0, &err) && strstr(err.message, "period_ns=999"));
}

/* Records reach the file without a flush: the timer hands off partial blocks, and so does a thread that
 * exits. Waits up to 10 s for the background threads. */
static cp_channel *timer_channel;
static void *log_ten_and_exit(void *arg) {
  for (int i = 0; i < 10; i++) cp_log(timer_channel, (intptr_t)arg + i);
  return NULL;
}

static void wait_written(cp_channel *ch, uint64_t want) {
  cp_channel_stats s;
  for (int i = 0; i < 1000; i++) {
    CHECK(cp_channel_stats_get(ch, &s, NULL) == 0);
    if (s.written >= want) break;
    sleep_ms(10);
  }
  CHECK(s.written == want);
}

static void background_hand_off(bool timer) {
  timer_channel = open_or_die(timer ? "timer" : "thread-exit", CP_HANDLER_BUFFERED, NULL, 0);
  if (timer) {
    log_ten_and_exit((void *)0); /* this thread stays */
  } else {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, log_ten_and_exit, (void *)0) == 0);
    pthread_join(t, NULL);
  }
  wait_written(timer_channel, 10);
  ipc_file f;
  CHECK(ipc_read(cp_channel_path(timer_channel), &f) == 0 && f.rows == 10 && !f.eos);
  ipc_free(&f);
  CHECK(cp_channel_close(timer_channel, NULL) == 0);
}

static void start(const char *dir, uint32_t block_records, uint32_t blocks, cp_full_policy policy,
                  cp_compression compression, uint32_t flush_interval_ms) {
  cp_options o;
  cp_options_init(&o);
  o.log_dir = dir;
  o.block_records = block_records;
  o.channel_blocks = blocks;
  o.full_policy = policy;
  o.compression = compression;
  o.flush_interval_ms = flush_interval_ms;
  cp_error err;
  CHECK(cp_start(&o, &err) == 0);
}

/* A writer far faster than the pipeline behind two 16-record blocks. */
static void full_policy(cp_full_policy policy, int64_t n) {
  cp_channel *ch = open_or_die(policy == CP_FULL_DROP ? "drop" : "block", CP_HANDLER_BUFFERED, NULL, 0);
  for (int64_t i = 0; i < n; i++) cp_log(ch, i);
  ipc_file f;
  close_and_read(ch, &f);
  cp_channel_stats s;
  CHECK(cp_channel_stats_get(ch, &s, NULL) == 0 && s.logged == (uint64_t)n);
  CHECK(s.written + s.dropped == s.logged);
  CHECK(policy == CP_FULL_DROP ? s.dropped > 0 : s.dropped == 0);
  CHECK(f.compressed && !strcmp(ipc_meta(&f, "compression"), "zstd"));
  for (size_t i = 1; i < f.rows; i++) CHECK(f.col0[i] > f.col0[i - 1]);
  ipc_free(&f);
  cp_library_stats ls;
  cp_library_stats_get(&ls);
  CHECK(ls.dropped >= s.dropped);
}

/* cp_handler_check says what cp_channel_open would, without a channel or even a started library. */
static void handler_check(void) {
  cp_error err;
  int64_t zero[] = {0}, ok[] = {64}, xy[] = {3, 2}, period[] = {1000};
  CHECK(cp_handler_check(CP_HANDLER_DOWNSAMPLE, ok, 1, &err) == 0);
  CHECK(cp_handler_check(CP_HANDLER_SPC, period, 1, &err) == 0);
  CHECK(cp_handler_check(CP_HANDLER_BUFFERED, NULL, 0, &err) == 0);
  CHECK(cp_handler_check(CP_HANDLER_DOWNSAMPLE, zero, 1, &err) == EINVAL && strstr(err.message, "downsample n=0"));
  CHECK(cp_handler_check(CP_HANDLER_XOY, xy, 2, &err) == EINVAL && strstr(err.message, "xoy x=3"));
  CHECK(cp_handler_check(CP_HANDLER_XOY, ok, 1, &err) == EINVAL && strstr(err.message, "takes 2 parameter(s), got 1"));
  CHECK(cp_handler_check(CP_HANDLER_COUNT_, NULL, 0, &err) == EINVAL && strstr(err.message, "unknown"));
  CHECK(!cp_channel_open("bad", CP_HANDLER_DOWNSAMPLE, zero, 1, NULL, NULL, 0, &err) && strstr(err.message, "n=0"));
}

int main(void) {
  handler_check();
  char dir[] = "/tmp/cp_test_handlers.XXXXXX";
  CHECK(mkdtemp(dir));
  start(dir, 1024, 4, CP_FULL_BLOCK, CP_COMPRESSION_NONE, 50);
  xoy();
  downsample();
  firstlast();
  firstlast_disk_full();
  null_and_identity();
  log_at();
  counters();
  background_hand_off(true);
  CHECK(cp_stop() == 0);

  start(dir, 1024, 4, CP_FULL_BLOCK, CP_COMPRESSION_NONE, 0);
  background_hand_off(false);
  CHECK(cp_stop() == 0);

  start(dir, 16, 2, CP_FULL_DROP, CP_COMPRESSION_ZSTD, 0);
  full_policy(CP_FULL_DROP, 2000000);
  CHECK(cp_stop() == 0);
  start(dir, 16, 2, CP_FULL_BLOCK, CP_COMPRESSION_ZSTD, 0);
  full_policy(CP_FULL_BLOCK, 100000);
  CHECK(cp_stop() == 0);

  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  puts("test_handlers: ok");
  return 0;
}
