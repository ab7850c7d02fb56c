/* Hand-off between processes, for the sanitizers to watch the inbox thread: a child (no library started) logs from
 * two threads into one hand-off channel and closes it, another child dies with SIGKILL after its records, a third
 * logs three rings of blocks at once, faster than the owner frees them; the parent's inbox takes them while it runs
 * and at its stop, and each file holds exactly what its writer logged, a full block as one record batch. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "cloudprofiler.h"
#include "handoff_tests.h"

enum {
  PER_THREAD = 3 * CP_HANDOFF_BLOCK_RECORDS + 17,
  KILLED = CP_HANDOFF_BLOCK_RECORDS + 5,
  RINGS = 5 * CP_HANDOFF_BLOCKS * CP_HANDOFF_BLOCK_RECORDS
};

static cp_handoff *shared;

static void *log_half(void *arg) {
  int64_t base = (int64_t)(intptr_t)arg * PER_THREAD;
  for (int64_t i = 0; i < PER_THREAD; i++) cp_handoff_log(shared, base + i);
  return NULL;
}

static void two_threads_then_close(const char *inbox) {
  const char *keys[] = {"test"}, *values[] = {"handoff"};
  cp_error err;
  shared = cp_handoff_open(inbox, "threads", NULL, NULL, 0, keys, values, 1, &err);
  CHECK(shared && cp_log_dir() == NULL); /* the writer's library never starts */
  pthread_t t[2];
  for (intptr_t i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, log_half, (void *)i) == 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  cp_handoff_stats stats;
  cp_handoff_stats_get(shared, &stats);
  CHECK(stats.logged == 2 * PER_THREAD && stats.dropped == 0);
  CHECK(cp_handoff_flush(shared, 10000, &err) == 0);
  cp_handoff_close(shared);
  _exit(0);
}

static void log_then_die(const char *inbox) {
  cp_handler buffered = CP_HANDLER_BUFFERED;
  cp_error err;
  cp_handoff *h = cp_handoff_open(inbox, "killed", &buffered, NULL, 0, NULL, NULL, 0, &err);
  CHECK(h);
  int64_t ids[KILLED];
  for (int64_t i = 0; i < KILLED; i++) ids[i] = i;
  cp_handoff_log_many(h, ids, KILLED);
  kill(getpid(), SIGKILL);
}

/* The writer fills its ring of blocks five times over in one call, faster than the owner encodes them (the parent
 * compresses with zstd): it waits for the owner to free each block and is woken as it does, so nothing is dropped
 * and the call takes well under CP_HANDOFF_WAIT_MS per ring; a writer left to its waits' deadline would take that
 * per ring, four times over. */
static void outpace_owner(const char *inbox) {
  cp_error err;
  cp_handoff *h = cp_handoff_open(inbox, "rings", NULL, NULL, 0, NULL, NULL, 0, &err);
  CHECK(h);
  static int64_t ids[RINGS];
  for (int64_t i = 0; i < RINGS; i++) ids[i] = i;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  cp_handoff_log_many(h, ids, RINGS);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  cp_handoff_stats stats;
  cp_handoff_stats_get(h, &stats);
  CHECK(stats.logged == RINGS && stats.dropped == 0);
  CHECK((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 2 * CP_HANDOFF_WAIT_MS);
  cp_handoff_close(h);
  _exit(0);
}

/* A writer forked before the parent has threads (as the sanitizers want), started once the inbox runs. */
static pid_t writer(void (*body)(const char *), const char *inbox, int *go) {
  int fds[2];
  CHECK(pipe(fds) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    char byte;
    close(fds[1]);
    CHECK(read(fds[0], &byte, 1) == 1);
    body(inbox);
  }
  close(fds[0]);
  *go = fds[1];
  return pid;
}

int main(void) {
  char dir[] = "/tmp/cp_test_handoff_XXXXXX";
  CHECK(mkdtemp(dir));
  char inbox[64];
  snprintf(inbox, sizeof inbox, "%s/inbox", dir);
  int go[3];
  pid_t writers[3] = {writer(two_threads_then_close, inbox, &go[0]), writer(log_then_die, inbox, &go[1]),
                      writer(outpace_owner, inbox, &go[2])};
  cp_options o;
  cp_options_init(&o);
  o.log_dir = dir;
  o.compression = CP_COMPRESSION_ZSTD;
  o.zstd_level = 3;
  cp_error err;
  CHECK(cp_start(&o, &err) == 0);
  CHECK(cp_inbox_start(inbox, &err) == 0 && !strcmp(cp_inbox_dir(), inbox));
  CHECK(cp_inbox_start(inbox, &err) == EALREADY);
  for (int i = 0; i < 3; i++) CHECK(write(go[i], "x", 1) == 1 && close(go[i]) == 0);
  int status;
  CHECK(waitpid(writers[0], &status, 0) == writers[0] && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(waitpid(writers[1], &status, 0) == writers[1] && WIFSIGNALED(status));
  CHECK(waitpid(writers[2], &status, 0) == writers[2] && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  cp_stop(); /* takes what the dead writer published, if the inbox has not found it dead yet */
  CHECK(cp_inbox_dir() == NULL && access(inbox, F_OK) != 0);

  ipc_file f;
  CHECK(rows_of(dir, "threads", &f) == 2 * PER_THREAD);
  CHECK(!strcmp(ipc_footer_meta(&f, "test"), "handoff") && !strcmp(ipc_footer_meta(&f, "handler"), "buffered"));
  static bool seen[2 * PER_THREAD];
  for (size_t i = 0; i < f.rows; i++) {
    CHECK(f.col0[i] >= 0 && f.col0[i] < 2 * PER_THREAD && !seen[f.col0[i]]);
    seen[f.col0[i]] = true;
  }
  ipc_free(&f);
  CHECK(rows_of(dir, "killed", &f) == KILLED);
  for (size_t i = 0; i < f.rows; i++) CHECK(f.col0[i] == (int64_t)i);
  /* the full block written as it lay in the shared memory, one record batch (the owner copies none of it into
   * blocks of its own), then the 5 records the dead writer left in its next block */
  CHECK(f.batches == 2);
  ipc_free(&f);
  size_t rings_rows = rows_of(dir, "rings", &f);
  if (rings_rows != RINGS) fprintf(stderr, "rings: %zu rows of %d, batches %zu\n", rings_rows, RINGS, f.batches);
  CHECK(rings_rows == RINGS);
  for (size_t i = 0; i < f.rows; i++) CHECK(f.col0[i] == (int64_t)i);
  CHECK(f.batches == 5 * CP_HANDOFF_BLOCKS);
  ipc_free(&f);
  printf("test_handoff: %d records from two threads, %d from a killed writer, %d through its ring five times: ok\n",
         2 * PER_THREAD, KILLED, RINGS);
  return 0;
}
