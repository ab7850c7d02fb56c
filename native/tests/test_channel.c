/* Channels from C: concurrent logging loses nothing, bad input is refused or counted. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "cloudprofiler.h"

enum { THREADS = 4, PER_THREAD = 250000 };

static cp_channel *shared;

static void *log_range(void *arg) {
  int64_t base = (int64_t)(intptr_t)arg * PER_THREAD;
  for (int64_t i = 0; i < PER_THREAD; i++) cp_log(shared, base + i);
  return NULL;
}

int main(void) {
  char dir[] = "/tmp/cp_test_channel.XXXXXX";
  CHECK(mkdtemp(dir));
  cp_options o;
  cp_options_init(&o);
  o.log_dir = dir;
  o.block_records = 1024; /* many hand-offs */
  o.channel_blocks = 4;
  cp_error err;
  CHECK(cp_start(&o, &err) == 0);
  CHECK(cp_start(&o, &err) == EALREADY);

  shared = cp_channel_open("threads", CP_HANDLER_BUFFERED, NULL, 0, NULL, NULL, 0, &err);
  CHECK(shared);
  pthread_t t[THREADS];
  for (intptr_t k = 0; k < THREADS; k++) CHECK(pthread_create(&t[k], NULL, log_range, (void *)k) == 0);
  for (int k = 0; k < THREADS; k++) pthread_join(t[k], NULL);
  CHECK(cp_channel_close(shared, &err) == 0);
  cp_channel_stats s;
  CHECK(cp_channel_stats_get(shared, &s, &err) == 0);
  CHECK(s.logged == THREADS * PER_THREAD && s.written == s.logged && s.dropped == 0);

  /* bad input */
  cp_handler h;
  CHECK(cp_handler_from_name("fastest", &h, &err) == EINVAL && strstr(err.message, "'fastest'"));
  int64_t bad[2] = {3, 2};
  CHECK(!cp_channel_open("x", CP_HANDLER_XOY, bad, 2, NULL, NULL, 0, &err) && err.code == EINVAL);
  CHECK(strstr(err.message, "x=3"));
  CHECK(!cp_channel_open("x", CP_HANDLER_DOWNSAMPLE, bad, 2, NULL, NULL, 0, &err) && strstr(err.message, "takes 1"));
  CHECK(cp_channel_close(shared, &err) == EBADF);
  cp_log(shared, 1);
  CHECK(cp_channel_stats_get(shared, &s, &err) == 0 && s.after_close == 1);
  cp_library_stats ls;
  cp_log(NULL, 1);
  cp_library_stats_get(&ls);
  CHECK(ls.null_handle_logs == 1 && ls.channels_opened == 1);

  /* the clock */
  cp_clock_reading r;
  CHECK(cp_clock_read(&r, &err) == 0 && r.tsc > 0 && r.monotonic_raw_ns > 0);
  cp_tsc_frequency f;
  CHECK(cp_tsc_frequency_get(&f, &err) == 0 && f.hz > 1e8 && f.uncertainty_hz < f.hz * 1e-3);
  uint64_t a = cp_tsc(), b = cp_tsc();
  CHECK(b >= a);
  CHECK(cp_stop() == 0 && cp_log_dir() == NULL);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  puts("test_channel: ok");
  return 0;
}
