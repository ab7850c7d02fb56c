/* Rules from C: bad rules are refused with a message naming them while the rules in force stay, and a channel
 * opened by rules switches handler under four logging threads without losing or doubling a record: every
 * segment file is whole, holds what it counts, and its records were taken after its switch. A thread that stalls
 * inside a call past the switch's grace gets its records counted as dropped, never lost. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "cloudprofiler.h"
#include "ipc_read.h"
#include "start.h"

enum { THREADS = 4, PER_THREAD = 300000, SEGMENTS_MAX = 64 };

static const char *handler_of_new_channel(const char *name, char *out, size_t cap) {
  cp_error err;
  cp_channel *ch = cp_channel_open_by_rules(name, NULL, NULL, 0, &err);
  CHECK(ch);
  CHECK(cp_channel_close(ch, &err) == 0);
  ipc_file f;
  CHECK(ipc_read(cp_channel_path(ch), &f) == 0);
  snprintf(out, cap, "%s", ipc_footer_meta(&f, "handler"));
  ipc_free(&f);
  return out;
}

static void bad_rules(void) {
  cp_error err;
  const char *good = "ysb.*=downsample:64\n# a comment\n\nb?=spc:1000000\n*=null\n";
  CHECK(cp_rules_check("other=identity", &err) == 0);
  CHECK(cp_rules_set(good, &err) == 0);
  CHECK(cp_rules_check("other=identity", &err) == 0);
  char in_force[1024];
  CHECK(cp_rules_get(in_force, sizeof in_force) == strlen("ysb.*=downsample:64\nb?=spc:1000000\n*=null\n"));
  CHECK(!strcmp(in_force, "ysb.*=downsample:64\nb?=spc:1000000\n*=null\n"));
  const char *bad[][2] = {
      {"ysb.*=nosuch", "line 1 'ysb.*=nosuch': unknown handler 'nosuch'"},
      {"a=downsample", "takes 1 parameter(s), got 0"},
      {"a=downsample:0", "downsample n=0 is out of range"},
      {"a=xoy:5:2", "xoy x=5 is out of range"},
      {"a=downsample:12x", "parameter '12x' is not a 64-bit integer"},
      {"a[b=buffered", "'[' without its ']'"},
      {" = buffered", "the pattern is empty"},
      {"a b=buffered", "blank or control character"},
      {"just text", "line 1 'just text': expected <pattern>=<handler>"},
      {"a=ret_start:0:1", "not chosen by rules"},
      {"*=null\n\nb=spc:1", "line 3 'b=spc:1': spc period_ns=1 is out of range"},
      {"a=buffered:1", "handler buffered takes 0 parameter(s), got 1"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memset(&err, 0, sizeof err);
    int rc = cp_rules_set(bad[i][0], &err);
    if (rc != EINVAL || !strstr(err.message, bad[i][1])) fprintf(stderr, "%s -> %d %s\n", bad[i][0], rc, err.message);
    CHECK(rc == EINVAL && strstr(err.message, bad[i][1]));
    memset(&err, 0, sizeof err);
    CHECK(cp_rules_check(bad[i][0], &err) == EINVAL && strstr(err.message, bad[i][1]));
    char now[1024];
    cp_rules_get(now, sizeof now);
    CHECK(!strcmp(now, in_force));
  }
  char handler[32];
  CHECK(!strcmp(handler_of_new_channel("ysb.join", handler, sizeof handler), "downsample"));
  CHECK(!strcmp(handler_of_new_channel("bx", handler, sizeof handler), "spc"));
  CHECK(!strcmp(handler_of_new_channel("other", handler, sizeof handler), "null"));
  CHECK(cp_rules_set("", &err) == 0 && cp_rules_get(NULL, 0) == 0);
  CHECK(!strcmp(handler_of_new_channel("other", handler, sizeof handler), "buffered"));
}

static cp_channel *racing;
static _Atomic int threads_done;

static void *log_range(void *arg) {
  int64_t base = (int64_t)(intptr_t)arg * PER_THREAD;
  for (int64_t i = 0; i < PER_THREAD; i++) cp_log(racing, base + i);
  atomic_fetch_add(&threads_done, 1);
  return NULL;
}

static uint64_t clock_tsc(const char *json) {
  const char *at = strstr(json, "\"tsc\": ");
  CHECK(at);
  return strtoull(at + 7, NULL, 10);
}

static int count_closed_files(const char *dir, const char *prefix) {
  int closed = 0;
  DIR *d = opendir(dir);
  CHECK(d);
  for (struct dirent *e; (e = readdir(d));) {
    if (strncmp(e->d_name, prefix, strlen(prefix))) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    ipc_file f;
    CHECK(ipc_read(path, &f) == 0);
    closed += f.footer;
    ipc_free(&f);
  }
  closedir(d);
  return closed;
}

/* Every handler of the cycle keeps every record, so the segments together hold each id exactly once. */
static void switch_under_load(const char *dir) {
  const char *cycle[] = {"race=identity", "race=downsample:1", "race=xoy:3:3", "race=buffered"};
  cp_error err;
  CHECK(cp_rules_set("race=buffered", &err) == 0);
  racing = cp_channel_open_by_rules("race", NULL, NULL, 0, &err);
  CHECK(racing);
  pthread_t t[THREADS];
  for (intptr_t k = 0; k < THREADS; k++) CHECK(pthread_create(&t[k], NULL, log_range, (void *)k) == 0);
  int switches = 0;
  while (atomic_load(&threads_done) < THREADS && switches < SEGMENTS_MAX - 1) {
    usleep(2000);
    CHECK(cp_rules_set(cycle[switches++ % 4], &err) == 0);
  }
  for (int k = 0; k < THREADS; k++) pthread_join(t[k], NULL);
  CHECK(switches >= 3);
  cp_channel_stats s;
  CHECK(cp_channel_stats_get(racing, &s, &err) == 0);
  CHECK(s.logged == (uint64_t)THREADS * PER_THREAD && s.dropped == 0);
  /* the channel's counts once, over its segments */
  cp_channel_count counts[64];
  size_t n = cp_channel_counts(counts, 64), race = 0;
  CHECK(n <= 64);
  for (size_t i = 0; i < n; i++) {
    if (strcmp(counts[i].name, "race")) continue;
    race++;
    CHECK(counts[i].logged == s.logged && counts[i].dropped == 0);
  }
  CHECK(race == 1);
  usleep(1500000); /* the timer thread closes the segments a switch retired a second ago */
  CHECK(count_closed_files(dir, "race.") == switches);
  CHECK(cp_channel_close(racing, &err) == 0);
  CHECK(cp_channel_stats_get(racing, &s, &err) == 0);
  CHECK(s.written == s.logged);

  /* the segment files, by rules.segment */
  char *paths[SEGMENTS_MAX] = {0};
  DIR *d = opendir(dir);
  CHECK(d);
  int files = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (strncmp(e->d_name, "race.", 5)) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    ipc_file f;
    CHECK(ipc_read(path, &f) == 0 && f.eos && f.footer);
    long segment = strtol(ipc_footer_meta(&f, "rules.segment"), NULL, 10);
    CHECK(segment >= 0 && segment < SEGMENTS_MAX && !paths[segment]);
    paths[segment] = strdup(path);
    files++;
    ipc_free(&f);
  }
  closedir(d);
  CHECK(files == switches + 1);
  uint8_t *seen = calloc((size_t)THREADS * PER_THREAD, 1);
  size_t rows = 0;
  for (int i = 0; i < files; i++) {
    ipc_file f;
    CHECK(paths[i] && ipc_read(paths[i], &f) == 0);
    uint64_t logged = strtoull(ipc_footer_meta(&f, "records.logged"), NULL, 10);
    uint64_t written = strtoull(ipc_footer_meta(&f, "records.written"), NULL, 10);
    uint64_t dropped = strtoull(ipc_footer_meta(&f, "records.dropped"), NULL, 10);
    CHECK(written + dropped == logged && written == f.rows);
    char expected_rule[64];
    snprintf(expected_rule, sizeof expected_rule, "%s", i ? cycle[(i - 1) % 4] : "race=buffered");
    CHECK(!strcmp(ipc_footer_meta(&f, "rules.rule"), expected_rule));
    if (i) {
      uint64_t in = clock_tsc(ipc_footer_meta(&f, "switch.in"));
      for (size_t r = 0; r < f.rows; r++) CHECK(f.col1[r] >= in);
      CHECK(strlen(ipc_footer_meta(&f, "switch.previous")) > 0);
    }
    if (i + 1 < files) CHECK(strncmp(ipc_footer_meta(&f, "switch.out"), "null", 4));
    for (size_t r = 0; r < f.rows; r++) {
      int64_t id = f.col0[r];
      CHECK(id >= 0 && id < (int64_t)THREADS * PER_THREAD && !seen[id]);
      seen[id] = 1;
    }
    rows += f.rows;
    ipc_free(&f);
    free(paths[i]);
  }
  CHECK(rows == (size_t)THREADS * PER_THREAD);
  free(seen);
  cp_log(racing, 1); /* after the close: counted, never logged */
  CHECK(cp_channel_stats_get(racing, &s, &err) == 0 && s.after_close == 1);
  printf("test_rules: %d switches under %d threads, %zu records, none lost\n", switches, THREADS, rows);
}

static uint64_t footer_count(const char *path, const char *key) {
  ipc_file f;
  CHECK(ipc_read(path, &f) == 0 && f.footer);
  uint64_t v = strtoull(ipc_footer_meta(&f, key), NULL, 10);
  ipc_free(&f);
  return v;
}

/* The stalled thread: cp_log_many reads its ids from two pages, the second unreadable until the test lets it go.
 * The fault stops the thread inside the call, between two records of a segment it has already taken. */
enum { IDS_PER_PAGE = 512 };
static int64_t *stall_ids;
static _Atomic int stalled, stall_released;

static void on_fault(int sig, siginfo_t *info, void *context) {
  (void)sig, (void)context;
  char *page = (char *)stall_ids + IDS_PER_PAGE * sizeof(int64_t);
  if ((char *)info->si_addr < page || (char *)info->si_addr >= page + IDS_PER_PAGE * sizeof(int64_t)) abort();
  atomic_store(&stalled, 1);
  struct timespec tick = {0, 1000000};
  while (!atomic_load(&stall_released)) nanosleep(&tick, NULL);
  mprotect(page, IDS_PER_PAGE * sizeof(int64_t), PROT_READ | PROT_WRITE); /* the read is retried on return */
}

static void *log_stalling(void *handle) {
  cp_log_many(handle, stall_ids, 2 * IDS_PER_PAGE);
  return NULL;
}

static void stall_past_grace(const char *dir) {
  size_t page = IDS_PER_PAGE * sizeof(int64_t);
  CHECK((size_t)sysconf(_SC_PAGESIZE) <= page);
  stall_ids = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(stall_ids != MAP_FAILED);
  for (int64_t i = 0; i < 2 * IDS_PER_PAGE; i++) stall_ids[i] = i;
  CHECK(mprotect((char *)stall_ids + page, page, PROT_NONE) == 0);
  struct sigaction act = {.sa_sigaction = on_fault, .sa_flags = SA_SIGINFO}, old;
  CHECK(sigaction(SIGSEGV, &act, &old) == 0);

  cp_error err;
  CHECK(cp_rules_set("stall=identity", &err) == 0);
  cp_channel *ch = cp_channel_open_by_rules("stall", NULL, NULL, 0, &err);
  CHECK(ch);
  char first[4096];
  snprintf(first, sizeof first, "%s", cp_channel_path(ch));
  pthread_t t;
  CHECK(pthread_create(&t, NULL, log_stalling, ch) == 0);
  while (!atomic_load(&stalled)) usleep(1000);
  CHECK(cp_rules_set("stall=buffered", &err) == 0);
  for (int waited = 0; !count_closed_files(dir, "stall."); waited++) {
    CHECK(waited < 300);
    usleep(10000);
  }
  atomic_store(&stall_released, 1); /* the rest of the call reaches the segment the timer thread closed */
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(sigaction(SIGSEGV, &old, NULL) == 0);

  cp_channel_stats s;
  CHECK(cp_channel_stats_get(ch, &s, &err) == 0);
  CHECK(s.logged == 2 * IDS_PER_PAGE && s.dropped == IDS_PER_PAGE && s.after_close == 0);
  CHECK(footer_count(first, "records.written") == IDS_PER_PAGE);
  CHECK(footer_count(first, "records.logged") == IDS_PER_PAGE);
  char second[4096];
  snprintf(second, sizeof second, "%s", cp_channel_path(ch));
  CHECK(cp_channel_close(ch, &err) == 0);
  CHECK(footer_count(second, "records.logged") == IDS_PER_PAGE);
  CHECK(footer_count(second, "records.dropped") == IDS_PER_PAGE);
  CHECK(footer_count(second, "records.written") == 0);
  munmap(stall_ids, 2 * page);
  printf("test_rules: a call stalled past the grace: %d records counted as dropped\n", IDS_PER_PAGE);
}

int main(void) {
  char dir[] = "/tmp/cp_test_rules_XXXXXX";
  start_in_new_folder(dir);
  bad_rules();
  switch_under_load(dir);
  stall_past_grace(dir);
  CHECK(cp_stop() == 0);
  printf("test_rules: ok\n");
  return 0;
}
