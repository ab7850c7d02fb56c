/* The records' samples (cp_channel_samples_take): an id's level is splitmix64's trailing zeros; channels that log the
 * same ids keep the same ones, exactly those of level >= their level, at most CP_SAMPLES_PER_CHANNEL; what a small
 * take leaves is taken next; counters keep none; levels never go down; takes that race loggers and two compression
 * threads (run under the sanitizers too) double no sample and keep every one at or above the level it says. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "check.h"
#include "cloudprofiler.h"

/* The formula again, apart from the library's, and its trailing zeros counted bit by bit. */
static uint64_t splitmix(int64_t id) {
  uint64_t z = (uint64_t)id + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static uint32_t level_of(int64_t id) {
  uint64_t z = splitmix(id);
  uint32_t level = 0;
  while (level < 64 && !(z >> level & 1)) level++;
  return level;
}

static void known_levels(void) {
  /* splitmix64 of these ids, worked out apart from the C (Python's integers) */
  struct {
    int64_t id;
    uint64_t mix;
    uint32_t level;
  } known[] = {
      {0, 0xe220a8397b1dcdafULL, 0},
      {1, 0x910a2dec89025cc1ULL, 0},
      {42, 0xbdd732262feb6e95ULL, 0},
      {-1, 0xe4d971771b652c20ULL, 5},
      {INT64_MIN, 0x481ec0a212a9f3dbULL, 0},
      {6, 0xbd64a5d9adefe000ULL, 13},
      {59587, 0x7dbba672b96d0000ULL, 16},
      {(int64_t)(0 - 0x9e3779b97f4a7c15ULL), 0, 64}, /* the one id whose mix is 0 */
  };
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    CHECK(splitmix(known[i].id) == known[i].mix);
    CHECK(level_of(known[i].id) == known[i].level);
    CHECK(cp_sample_level(known[i].id) == known[i].level);
  }
  for (int64_t id = -5000; id < 5000; id++) CHECK(cp_sample_level(id * 7919) == level_of(id * 7919));
}

enum { CAP = 1 << 16 };
static cp_channel_sample taken[CAP];

/* Every sample there is now, taken in one call. */
static size_t take_all(void) {
  size_t n = cp_channel_samples_take(taken, CAP);
  CHECK(n < CAP);
  return n;
}

/* The samples of one channel name among taken[0..n): their ids in `ids`, the level they share in *level. */
static size_t of_name(size_t n, const char *name, int64_t *ids, uint32_t *level) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(taken[i].name, name)) continue;
    if (k) CHECK(taken[i].level == *level);
    *level = taken[i].level;
    CHECK(taken[i].tsc != 0);
    ids[k++] = taken[i].id;
  }
  return k;
}

static int compare_ids(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* ids[0..k) are exactly those of logged[0..n) whose level is >= `level` (distinct ids). */
static void exactly_those_at(const int64_t *logged, size_t n, int64_t *ids, size_t k, uint32_t level) {
  int64_t *expected = malloc(n * sizeof *expected);
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (level_of(logged[i]) >= level) expected[m++] = logged[i];
  qsort(expected, m, sizeof *expected, compare_ids);
  qsort(ids, k, sizeof *ids, compare_ids);
  CHECK(m == k && (k == 0 || memcmp(expected, ids, k * sizeof *ids) == 0));
  free(expected);
}

static cp_channel *open_channel(const char *name, cp_handler handler, const int64_t *params, size_t n_params) {
  cp_error err;
  cp_channel *ch = cp_channel_open(name, handler, params, n_params, NULL, NULL, 0, &err);
  if (!ch) fprintf(stderr, "%s\n", err.message);
  CHECK(ch);
  return ch;
}

enum { N = 10000 };

/* Two buffered channels and an identity one (its own batch writes), the same 10,000 ids: the same samples, at the
 * lowest level at which at most 256 of the ids qualify. */
static void same_ids_same_samples(void) {
  static int64_t logged[N], ids[3][CAP];
  for (int i = 0; i < N; i++) logged[i] = (int64_t)i * 1000003 - 5000000000LL;
  cp_channel *a = open_channel("hop.a", CP_HANDLER_BUFFERED, NULL, 0);
  cp_channel *b = open_channel("hop.b", CP_HANDLER_BUFFERED, NULL, 0);
  cp_channel *c = open_channel("hop.c", CP_HANDLER_IDENTITY, NULL, 0);
  for (int i = 0; i < N; i++) cp_log(a, logged[i]);
  cp_log_many(b, logged, N / 2); /* in another order of calls */
  for (int i = N - 1; i >= N / 2; i--) cp_log(b, logged[i]);
  for (int i = 0; i < N; i++) cp_log(c, logged[i]);
  cp_error err;
  CHECK(cp_channel_close(a, &err) == 0 && cp_channel_close(b, &err) == 0 && cp_channel_close(c, &err) == 0);

  size_t n = take_all();
  uint32_t level[3];
  size_t k[3] = {of_name(n, "hop.a", ids[0], &level[0]), of_name(n, "hop.b", ids[1], &level[1]),
                 of_name(n, "hop.c", ids[2], &level[2])};
  CHECK(k[0] > 0);
  size_t at_level = 0, below = 0;
  for (int i = 0; i < N; i++) at_level += level_of(logged[i]) >= level[0], below += level_of(logged[i]) + 1 >= level[0];
  CHECK(level[0] > 0 && below > CP_SAMPLES_PER_CHANNEL && at_level <= CP_SAMPLES_PER_CHANNEL);
  for (int j = 0; j < 3; j++) {
    CHECK(k[j] > 0 && k[j] <= CP_SAMPLES_PER_CHANNEL && level[j] == level[0] && k[j] == k[0]);
    for (size_t i = 0; i < k[j]; i++) CHECK(cp_sample_level(ids[j][i]) >= level[j]);
    exactly_those_at(logged, N, ids[j], k[j], level[j]);
    CHECK(memcmp(ids[j], ids[0], k[0] * sizeof(int64_t)) == 0); /* sorted by exactly_those_at */
  }
  printf("test_samples: 10000 ids on buffered, buffered, identity: %zu samples each at level %u\n", k[0], level[0]);
  CHECK(take_all() == 0); /* taken once, and the closed channels' samples are gone */
}

/* An open channel that logs fewer ids than it can hold keeps them all at level 0; its level never goes down; a take
 * with a small array leaves the rest for the next one. */
static void few_ids_and_small_takes(void) {
  static int64_t logged[N], ids[CAP];
  cp_library_stats before, after; /* the scan counts each record it read, and its time */
  cp_library_stats_get(&before);
  cp_channel *ch = open_channel("few", CP_HANDLER_BUFFERED, NULL, 0);
  for (int i = 0; i < 100; i++) cp_log(ch, logged[i] = 3 * i + 1);
  cp_error err;
  CHECK(cp_channel_flush(ch, &err) == 0);
  cp_library_stats_get(&after);
  CHECK(after.sample_scanned - before.sample_scanned == 100 && after.sample_scan_ticks > before.sample_scan_ticks);
  uint32_t level = 99;
  size_t n = take_all();
  CHECK(of_name(n, "few", ids, &level) == 100 && n == 100 && level == 0);
  exactly_those_at(logged, 100, ids, 100, 0);

  for (int i = 0; i < 100; i++) cp_log(ch, logged[i] = 1000 + i);
  CHECK(cp_channel_flush(ch, &err) == 0);
  size_t got = 0;
  for (int round = 0; round < 4; round++) { /* 30, 30, 30 and the last 10 */
    size_t m = cp_channel_samples_take(taken, 30);
    CHECK(m == (round < 3 ? 30u : 10u));
    for (size_t i = 0; i < m; i++) {
      CHECK(!strcmp(taken[i].name, "few") && taken[i].level == 0);
      ids[got++] = taken[i].id;
    }
  }
  CHECK(got == 100 && cp_channel_samples_take(taken, 30) == 0);
  exactly_those_at(logged, 100, ids, 100, 0);

  for (int i = 0; i < N; i++) cp_log(ch, logged[i] = 200000 + i); /* the level rises */
  CHECK(cp_channel_flush(ch, &err) == 0);
  n = take_all();
  size_t k = of_name(n, "few", ids, &level);
  CHECK(level > 0 && k <= CP_SAMPLES_PER_CHANNEL);
  exactly_those_at(logged, N, ids, k, level);
  uint32_t risen = level;
  for (int i = 0; i < 100; i++) cp_log(ch, logged[i] = 900000 + i); /* few again: the level stays */
  CHECK(cp_channel_close(ch, &err) == 0);
  n = take_all();
  k = of_name(n, "few", ids, &level);
  if (k) CHECK(level == risen);
  exactly_those_at(logged, 100, ids, k, risen);
  CHECK(cp_channel_samples_take(NULL, 0) == 0);
}

/* Counters keep periods, not records: no samples; nor a null channel. The id of level 64 logged more times than a
 * channel holds takes its level past 64, where it keeps nothing more. */
static void counters_and_the_last_level(void) {
  int64_t period = 1000000;
  cp_channel *spc = open_channel("count.spc", CP_HANDLER_SPC, &period, 1);
  cp_channel *mpc = open_channel("count.mpc", CP_HANDLER_MPC, &period, 1);
  cp_channel *none = open_channel("count.null", CP_HANDLER_NULL, NULL, 0);
  for (int i = 0; i < N; i++) cp_log(spc, i), cp_log(mpc, i), cp_log(none, i);
  cp_channel *top = open_channel("top", CP_HANDLER_BUFFERED, NULL, 0);
  int64_t last = (int64_t)(0 - 0x9e3779b97f4a7c15ULL);
  for (int i = 0; i <= CP_SAMPLES_PER_CHANNEL; i++) cp_log(top, last);
  for (int i = 0; i < N; i++) cp_log(top, i);
  cp_error err;
  CHECK(cp_channel_close(spc, &err) == 0 && cp_channel_close(mpc, &err) == 0 && cp_channel_close(none, &err) == 0);
  CHECK(cp_channel_close(top, &err) == 0);
  CHECK(take_all() == 0);
}

/* Loggers on several threads, blocks small enough that both compression threads encode one channel's at once, and a
 * taker meanwhile: every sample's id is of the level it says, no id comes twice, a channel's level never goes down
 * and no take holds more than CP_SAMPLES_PER_CHANNEL of a channel. */
enum { THREADS = 4, PER_THREAD = 200000 };
static cp_channel *racing[2];
static _Atomic int logging_done;

static void *log_range(void *arg) {
  int64_t base = (int64_t)(intptr_t)arg * PER_THREAD;
  for (int64_t i = 0; i < PER_THREAD; i++) cp_log(racing[i & 1], base + i);
  return NULL;
}

static void *take_meanwhile(void *arg) {
  uint8_t *seen = arg;
  static cp_channel_sample mine[CAP];
  uint32_t last_level[2] = {0, 0};
  for (int done = 0; !done;) {
    done = atomic_load(&logging_done);
    size_t n = cp_channel_samples_take(mine, CAP), per[2] = {0, 0};
    for (size_t i = 0; i < n; i++) {
      int which = strcmp(mine[i].name, "race.0") == 0 ? 0 : 1;
      CHECK(which == 0 || !strcmp(mine[i].name, "race.1"));
      CHECK(mine[i].level >= last_level[which] && cp_sample_level(mine[i].id) >= mine[i].level);
      last_level[which] = mine[i].level;
      CHECK((mine[i].id & 1) == which && mine[i].id >= 0 && mine[i].id < THREADS * PER_THREAD && !seen[mine[i].id]);
      seen[mine[i].id] = 1;
      per[which]++;
    }
    CHECK(per[0] <= CP_SAMPLES_PER_CHANNEL && per[1] <= CP_SAMPLES_PER_CHANNEL);
  }
  return NULL;
}

static void races(void) {
  racing[0] = open_channel("race.0", CP_HANDLER_BUFFERED, NULL, 0);
  racing[1] = open_channel("race.1", CP_HANDLER_BUFFERED, NULL, 0);
  uint8_t *seen = calloc(THREADS * PER_THREAD, 1);
  pthread_t taker, loggers[THREADS];
  CHECK(pthread_create(&taker, NULL, take_meanwhile, seen) == 0);
  for (intptr_t t = 0; t < THREADS; t++) CHECK(pthread_create(&loggers[t], NULL, log_range, (void *)t) == 0);
  for (int t = 0; t < THREADS; t++) pthread_join(loggers[t], NULL);
  cp_error err;
  CHECK(cp_channel_close(racing[0], &err) == 0 && cp_channel_close(racing[1], &err) == 0);
  atomic_store(&logging_done, 1); /* the taker's next round is its last: after the close */
  pthread_join(taker, NULL);
  size_t kept = 0;
  for (size_t i = 0; i < THREADS * PER_THREAD; i++) kept += seen[i];
  printf("test_samples: racing takes, %zu samples of %d records\n", kept, THREADS * PER_THREAD);
  CHECK(kept > 0 && take_all() == 0);
  free(seen);
}

int main(void) {
  known_levels();
  char dir[] = "/tmp/cp_samples_XXXXXX";
  CHECK(mkdtemp(dir));
  cp_options o;
  cp_options_init(&o);
  o.log_dir = dir;
  o.block_records = 1024;
  o.compression_threads = 2;
  cp_error err;
  CHECK(cp_start(&o, &err) == 0);
  same_ids_same_samples();
  few_ids_and_small_takes();
  counters_and_the_last_level();
  races();
  CHECK(cp_stop() == 0);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  printf("test_samples: ok\n");
  return 0;
}
