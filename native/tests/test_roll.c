/* Rolling from C: a bad roll size is refused naming it; a channel under four logging threads rolls into many
 * segments without losing or doubling a record: every segment is closed with its footer, holds what it counts, and
 * each thread's ids run on from one segment to the next; an idle channel never rolls. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "check.h"
#include "cloudprofiler.h"
#include "ipc_read.h"

enum { THREADS = 4, PER_THREAD = 200000, SEGMENTS_MAX = 4096 };

static cp_channel *rolling;

static void *log_range(void *arg) {
  int64_t base = (int64_t)(intptr_t)arg * PER_THREAD;
  for (int64_t i = 0; i < PER_THREAD; i++) cp_log(rolling, base + i);
  return NULL;
}

static void bad_roll_sizes(void) {
  cp_options o;
  cp_options_init(&o);
  o.log_dir = "/tmp";
  cp_error err;
  o.roll_bytes = 100;
  CHECK(cp_start(&o, &err) == EINVAL && strstr(err.message, "roll_bytes=100 is out of range"));
  o.roll_bytes = -2;
  CHECK(cp_start(&o, &err) == EINVAL && strstr(err.message, "roll_bytes=-2"));
  o.roll_bytes = -1;
  setenv("CLOUDPROFILER_ROLL_BYTES", "64M", 1);
  CHECK(cp_start(&o, &err) == EINVAL && strstr(err.message, "CLOUDPROFILER_ROLL_BYTES='64M' is invalid"));
  CHECK(cp_log_dir() == NULL);
}

/* The files of channel `prefix` in dir, by channel number (the order of the segments). */
static int segment_files(const char *dir, const char *prefix, char **paths) {
  int n = 0;
  uint64_t numbers[SEGMENTS_MAX];
  DIR *d = opendir(dir);
  CHECK(d);
  for (struct dirent *e; (e = readdir(d));) {
    if (strncmp(e->d_name, prefix, strlen(prefix))) continue;
    CHECK(n < SEGMENTS_MAX);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    ipc_file f;
    CHECK(ipc_read(path, &f) == 0);
    uint64_t number = strtoull(ipc_footer_meta(&f, "channel.number"), NULL, 10);
    ipc_free(&f);
    int at = n++;
    for (; at > 0 && numbers[at - 1] > number; at--) numbers[at] = numbers[at - 1], paths[at] = paths[at - 1];
    numbers[at] = number, paths[at] = strdup(path);
  }
  closedir(d);
  return n;
}

int main(void) {
  bad_roll_sizes();
  char dir[] = "/tmp/cp_test_roll_XXXXXX";
  CHECK(mkdtemp(dir));
  setenv("CLOUDPROFILER_ROLL_BYTES", "65536", 1); /* the option's default (-1) takes it */
  cp_options o;
  cp_options_init(&o);
  o.log_dir = dir;
  o.block_records = 512; /* batches of 8 KiB: a segment holds about 8 of them */
  cp_error err;
  CHECK(cp_start(&o, &err) == 0);
  const char *keys[] = {"test"}, *values[] = {"roll"};
  rolling = cp_channel_open("rolling", CP_HANDLER_BUFFERED, NULL, 0, keys, values, 1, &err);
  cp_channel *idle = cp_channel_open("idle", CP_HANDLER_BUFFERED, NULL, 0, NULL, NULL, 0, &err);
  CHECK(rolling && idle);
  pthread_t t[THREADS];
  for (intptr_t k = 0; k < THREADS; k++) CHECK(pthread_create(&t[k], NULL, log_range, (void *)k) == 0);
  for (int k = 0; k < THREADS; k++) pthread_join(t[k], NULL);
  CHECK(cp_stop() == 0);
  cp_channel_stats s;
  CHECK(cp_channel_stats_get(rolling, &s, &err) == 0);
  CHECK(s.logged == (uint64_t)THREADS * PER_THREAD && s.written == s.logged && s.dropped == 0);

  char *paths[SEGMENTS_MAX];
  int files = segment_files(dir, "rolling.", paths);
  CHECK(files >= 20);
  int64_t next_id[THREADS];
  for (int k = 0; k < THREADS; k++) next_id[k] = (int64_t)k * PER_THREAD;
  size_t rows = 0;
  for (int i = 0; i < files; i++) {
    ipc_file f;
    CHECK(ipc_read(paths[i], &f) == 0 && f.eos && f.footer);
    CHECK(!strcmp(ipc_footer_meta(&f, "closed"), "true") && !strcmp(ipc_footer_meta(&f, "test"), "roll"));
    CHECK(!strcmp(ipc_footer_meta(&f, "switch.reason"), i ? "roll" : "open"));
    uint64_t logged = strtoull(ipc_footer_meta(&f, "records.logged"), NULL, 10);
    uint64_t written = strtoull(ipc_footer_meta(&f, "records.written"), NULL, 10);
    uint64_t dropped = strtoull(ipc_footer_meta(&f, "records.dropped"), NULL, 10);
    CHECK(written + dropped == logged && written == f.rows && dropped == 0);
    CHECK(!strcmp(ipc_footer_meta(&f, "switch.out"), "null") == (i + 1 == files)); /* unpadded in the footer */
    for (size_t r = 0; r < f.rows; r++) { /* each thread's ids in order, across the segments too */
      int64_t id = f.col0[r];
      CHECK(id >= 0 && id < (int64_t)THREADS * PER_THREAD);
      CHECK(id == next_id[id / PER_THREAD]++);
    }
    rows += f.rows;
    ipc_free(&f);
    free(paths[i]);
  }
  CHECK(rows == (size_t)THREADS * PER_THREAD);
  CHECK(segment_files(dir, "idle.", paths) == 1);
  free(paths[0]);
  printf("test_roll: %d segments under %d threads, %zu records, none lost or doubled\n", files, THREADS, rows);
  printf("test_roll: ok\n");
  return 0;
}
