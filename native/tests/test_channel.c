/* Channels from C: concurrent logging loses and duplicates nothing (checked in the file), a flush makes
 * records and metadata visible in a file that is still open, bad input is refused or counted, and a stop whose
 * writes failed says so. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "cloudprofiler.h"
#include "failing_fd.h"
#include "ipc_read.h"

enum { THREADS = 8, PER_THREAD = 1000000 };

static cp_channel *shared;

static void *log_range(void *arg) {
  int64_t base = (int64_t)(intptr_t)arg * PER_THREAD;
  for (int64_t i = 0; i < PER_THREAD; i++) cp_log(shared, base + i);
  return NULL; /* the thread's partial block is handed off when it exits */
}

static void bad_log_folder(void) {
  cp_options o;
  cp_options_init(&o);
  o.log_dir = "/proc/version/logs"; /* under a regular file */
  cp_error err;
  CHECK(cp_start(&o, &err) != 0 && strstr(err.message, "/proc/version/logs"));
  CHECK(cp_log_dir() == NULL);
  cp_options_init(&o);
  o.tsc_read = (cp_tsc_read)7;
  CHECK(cp_start(&o, &err) == EINVAL && strstr(err.message, "tsc_read=7"));
  CHECK(cp_log_dir() == NULL);
}

/* Every id of every thread exactly once; a thread's ranges are written in the order it handed them off, so
 * its ids come in order and its TSCs never go back. */
static void check_threads_file(const char *path) {
  ipc_file f;
  int rc = ipc_read(path, &f);
  if (rc) fprintf(stderr, "%s\n", f.error);
  CHECK(rc == 0 && f.eos && f.footer && f.rows == (size_t)THREADS * PER_THREAD);
  uint8_t *seen = calloc((size_t)THREADS * PER_THREAD, 1);
  uint64_t last_tsc[THREADS] = {0};
  int64_t next_id[THREADS];
  for (int k = 0; k < THREADS; k++) next_id[k] = (int64_t)k * PER_THREAD;
  for (size_t i = 0; i < f.rows; i++) {
    int64_t id = f.col0[i];
    CHECK(id >= 0 && id < (int64_t)THREADS * PER_THREAD && !seen[id]);
    seen[id] = 1;
    int k = (int)(id / PER_THREAD);
    CHECK(id == next_id[k] && f.col1[i] >= last_tsc[k]);
    next_id[k]++;
    last_tsc[k] = f.col1[i];
  }
  free(seen);
  CHECK(!strcmp(ipc_meta(&f, "closed"), "true "));
  CHECK(strtoull(ipc_meta(&f, "records.written"), NULL, 10) == f.rows);
  ipc_free(&f);
}

static void flush_is_visible(void) {
  cp_error err;
  const char *keys[] = {"job"};
  const char *values[] = {"test"};
  cp_channel *ch = cp_channel_open("flush me/now", CP_HANDLER_BUFFERED, NULL, 0, keys, values, 1, &err);
  CHECK(ch && strstr(cp_channel_path(ch), "/flush_me_now."));
  for (int i = 0; i < 5000; i++) cp_log(ch, i);
  CHECK(cp_channel_flush(ch, &err) == 0);
  ipc_file f;
  CHECK(ipc_read(cp_channel_path(ch), &f) == 0 && !f.eos && f.rows == 5000);
  CHECK(!strcmp(ipc_meta(&f, "closed"), "false") && !strcmp(ipc_meta(&f, "job"), "test"));
  CHECK(strtoull(ipc_meta(&f, "records.written"), NULL, 10) == 5000);
  CHECK(!strncmp(ipc_meta(&f, "close.clock"), "null ", 5));
  size_t schema_len = f.schema_len;
  ipc_free(&f);
  cp_log(ch, 5000);
  CHECK(cp_channel_close(ch, &err) == 0);
  CHECK(ipc_read(cp_channel_path(ch), &f) == 0 && f.eos && f.footer && f.rows == 5001 && f.schema_len == schema_len);
  CHECK(!strncmp(ipc_meta(&f, "close.clock"), "{\"tsc\": ", 8));
  const char *clock = ipc_footer_meta(&f, "close.clock"); /* the footer's value is the JSON alone */
  CHECK(!strncmp(clock, "{\"tsc\": ", 8) && clock[strlen(clock) - 1] == '}');
  CHECK(!strcmp(ipc_footer_meta(&f, "job"), "test") && !strcmp(ipc_footer_meta(&f, "handler.params"), "[]"));
  ipc_free(&f);
}

/* The disk fills up under an open channel: cp_stop returns the error and reports it on stderr, naming the
 * channel; the records it could not write are counted as dropped. */
static void stop_after_failed_writes(const char *dir) {
  cp_options o;
  cp_options_init(&o);
  o.log_dir = dir;
  cp_error err;
  CHECK(cp_start(&o, &err) == 0);
  cp_channel *ch = cp_channel_open("disk-full", CP_HANDLER_BUFFERED, NULL, 0, NULL, NULL, 0, &err);
  CHECK(ch && fill_disk_under(cp_channel_path(ch)) > 0);
  for (int i = 0; i < 100; i++) cp_log(ch, i);

  char report[] = "/tmp/cp_test_channel_stderr.XXXXXX";
  int out = mkstemp(report), saved = dup(2);
  CHECK(out >= 0 && saved >= 0 && dup2(out, 2) == 2);
  int rc = cp_stop();
  CHECK(dup2(saved, 2) == 2);
  close(saved);
  char text[4096] = "";
  CHECK(pread(out, text, sizeof text - 1, 0) > 0);
  close(out);
  unlink(report);
  CHECK(rc == ENOSPC);
  CHECK(strstr(text, "closing channel 'disk-full' at stop") && strstr(text, strerror(ENOSPC)));
  cp_channel_stats s;
  CHECK(cp_channel_stats_get(ch, &s, &err) == 0 && s.logged == 100 && s.written == 0 && s.dropped == 100);
  CHECK(cp_stop() == 0); /* nothing left to fail */
}

int main(void) {
  char dir[] = "/tmp/cp_test_channel.XXXXXX";
  CHECK(mkdtemp(dir));
  bad_log_folder();
  cp_options o;
  cp_options_init(&o);
  o.log_dir = dir;
  o.block_records = 4096; /* many hand-offs, reordered between threads */
  o.channel_blocks = 4;
  o.roll_bytes = 0; /* one file, read whole below */
  cp_error err;
  CHECK(cp_start(&o, &err) == 0);
  CHECK(cp_start(&o, &err) == EALREADY && strstr(err.message, dir));
  CHECK(!strcmp(cp_log_dir(), dir));

  shared = cp_channel_open("threads", CP_HANDLER_BUFFERED, NULL, 0, NULL, NULL, 0, &err);
  CHECK(shared);
  pthread_t t[THREADS];
  for (intptr_t k = 0; k < THREADS; k++) CHECK(pthread_create(&t[k], NULL, log_range, (void *)k) == 0);
  for (int k = 0; k < THREADS; k++) pthread_join(t[k], NULL);
  CHECK(cp_channel_close(shared, &err) == 0);
  cp_channel_stats s;
  CHECK(cp_channel_stats_get(shared, &s, &err) == 0);
  CHECK(s.logged == (uint64_t)THREADS * PER_THREAD && s.written == s.logged && s.kept == s.logged && s.dropped == 0);
  check_threads_file(cp_channel_path(shared));
  flush_is_visible();

  /* bad input */
  cp_handler h;
  CHECK(cp_handler_from_name("fastest", &h, &err) == EINVAL && strstr(err.message, "'fastest'"));
  CHECK(cp_handler_from_name("xoy", &h, &err) == 0 && h == CP_HANDLER_XOY);
  int64_t bad[2] = {3, 2};
  CHECK(!cp_channel_open("x", CP_HANDLER_XOY, bad, 2, NULL, NULL, 0, &err) && err.code == EINVAL);
  CHECK(strstr(err.message, "x=3"));
  CHECK(!cp_channel_open("x", CP_HANDLER_DOWNSAMPLE, bad, 2, NULL, NULL, 0, &err) && strstr(err.message, "takes 1"));
  CHECK(!cp_channel_open("x", (cp_handler)42, NULL, 0, NULL, NULL, 0, &err) && strstr(err.message, "42"));
  CHECK(!cp_channel_open(NULL, CP_HANDLER_NULL, NULL, 0, NULL, NULL, 0, &err) && err.code == EINVAL);
  CHECK(cp_channel_close(shared, &err) == EBADF && strstr(err.message, "threads"));
  CHECK(cp_channel_flush(shared, &err) == EBADF);
  CHECK(cp_channel_parameterize(shared, 0, 1, &err) == EBADF);
  cp_log(shared, 1);
  int64_t many[3] = {1, 2, 3};
  cp_log_many(shared, many, 3);
  CHECK(cp_channel_stats_get(shared, &s, &err) == 0 && s.after_close == 4 &&
        s.written == (uint64_t)THREADS * PER_THREAD);
  CHECK(cp_channel_stats_get(NULL, &s, &err) == EBADF);
  CHECK(cp_channel_path(NULL) == NULL);
  cp_library_stats ls;
  cp_log(NULL, 1);
  cp_log_many(NULL, many, 3);
  cp_library_stats_get(&ls);
  CHECK(ls.null_handle_logs == 4 && ls.channels_opened == 2 && ls.channels_open == 0);
  CHECK(ls.logged == (uint64_t)THREADS * PER_THREAD + 5001); /* both channels; the no-ops after close are not */
  cp_channel_count counts[2];
  CHECK(cp_channel_counts(NULL, 0) == 2 && cp_channel_counts(counts, 1) == 2); /* newest first */
  CHECK(cp_channel_counts(counts, 2) == 2 && !strcmp(counts[1].name, "threads"));
  CHECK(counts[1].logged == (uint64_t)THREADS * PER_THREAD && counts[0].logged == 5001);
  CHECK(counts[0].logged + counts[1].logged == ls.logged && counts[0].dropped + counts[1].dropped == ls.dropped);

  CHECK(cp_stop() == 0 && cp_log_dir() == NULL);
  CHECK(cp_stop() == 0); /* idempotent */
  cp_log(shared, 1);     /* still a counted no-op after stop */
  stop_after_failed_writes(dir);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  puts("test_channel: ok");
  return 0;
}
