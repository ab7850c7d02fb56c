/* The inbox against hostile writers, as a Python UDF could be one: a separate process maps its hand-off file and
 * publishes, between good blocks, blocks whose heads lie (counts past the block or below what was taken, states
 * that do not exist, random bytes) while it scribbles over its header (its flush request too) and tries to shrink
 * its memory (which would
 * kill the owner with SIGBUS: the seal refuses it); another drops names of random text and of memory of random
 * sizes and headers, sealed or not, into the folder. The owner must live through every round (run it under the
 * sanitizers: `make fuzz`), take every good record in order, and count each bad block in the channel's
 * handoff.rejected_blocks. CP_FUZZ_SEED=<n> repeats a run; the seed is printed. */
#define _GNU_SOURCE /* memfd_create, F_ADD_SEALS */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#include "handoff.h"
#include "handoff_tests.h"

enum { ROUNDS = 4000, MAX_GOOD = 96, STRAY_FILES = 60 };

typedef struct tally {
  int64_t good; /* records in good blocks: ids 0 .. good-1, published in that order */
  uint64_t bad; /* blocks whose head lies */
} tally;

static uint64_t state = 1;
static uint64_t rnd(void) { /* xorshift64*: the same run for the same seed */
  state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
  return state * 2685821657736338717ull;
}

static void fill_random(void *p, size_t n) {
  for (size_t i = 0; i < n; i++) ((unsigned char *)p)[i] = (unsigned char)rnd();
}

/* Waits until the owner freed block b (it does within milliseconds); exits 3 when it does not in 10 s. */
static void wait_free(cp_handoff_header *h, uint32_t b) {
  struct timespec nap = {0, 100000};
  for (int i = 0; atomic_load(&h->heads[b].state) != CP_HANDOFF_FREE; i++) {
    if (i > 100000) _exit(3);
    nanosleep(&nap, NULL);
  }
}

/* Asks for the records up to `target` as a writer's flush does (the owner takes a filling block only when asked,
 * closed or after its flush interval), then waits until they are taken. */
static void wait_taken(cp_handoff_header *h, uint64_t target) {
  struct timespec nap = {0, 100000};
  atomic_store(&h->wanted, target);
  for (int i = 0; atomic_load(&h->taken) < target; i++) {
    if (i > 100000) _exit(4);
    nanosleep(&nap, NULL);
  }
}

static void good_records(void *map, uint32_t b, uint32_t from, uint32_t to, tally *t) {
  for (uint32_t i = from; i < to; i++) {
    cp__handoff_ids(map, b)[i] = t->good++;
    cp__handoff_tscs(map, b)[i] = 1000 + (uint64_t)i;
  }
}

/* A head that fails the owner's checks: a count past the block, or a state that does not exist, or random bytes
 * drawn until they are one of those. */
static void bad_head(cp_handoff_block_head *head) {
  uint32_t s, c;
  switch (rnd() % 3) {
    case 0:
      s = rnd() % 2 ? CP_HANDOFF_FULL : CP_HANDOFF_FILLING;
      c = rnd() % 2 ? 0xFFFFFFF0u : CP_HANDOFF_BLOCK_RECORDS + 1 + (uint32_t)(rnd() % 0x7FFFFFFF);
      break;
    case 1:
      s = 3 + (uint32_t)(rnd() % 0xFFFFFFF0u);
      c = (uint32_t)rnd();
      break;
    default:
      do s = (uint32_t)rnd(), c = (uint32_t)rnd();
      while (s == CP_HANDOFF_FREE ||
             ((s == CP_HANDOFF_FULL || s == CP_HANDOFF_FILLING) && c <= CP_HANDOFF_BLOCK_RECORDS));
  }
  atomic_store(&head->count, c);
  atomic_store(&head->state, s);
}

/* The hand-off memory that the name at `path` in an inbox folder points to, opened read-write. */
static int open_memory(const char *path) {
  char text[64] = {0};
  int name = open(path, O_RDONLY);
  CHECK(name >= 0 && read(name, text, sizeof text - 1) > 0 && close(name) == 0);
  text[strcspn(text, "\n")] = '\0';
  int fd = open(text, O_RDWR);
  CHECK(fd >= 0);
  return fd;
}

/* The hostile writer: opens its channel as any writer does, then writes the shared blocks itself. Reports its
 * tally through `out`. */
static void hostile(const char *inbox, int out) {
  cp_handler buffered = CP_HANDLER_BUFFERED;
  cp_error err;
  cp_handoff *w = cp_handoff_open(inbox, "fuzz", &buffered, NULL, 0, NULL, NULL, 0, &err);
  CHECK(w);
  int fd = open_memory(cp_handoff_path(w));
  void *map = mmap(NULL, CP_HANDOFF_FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  CHECK(map != MAP_FAILED);
  cp_handoff_header *h = map;
  tally t = {0, 0};
  uint64_t published = 0;
  for (uint32_t r = 0, b = 0; r < ROUNDS; r++, b = (b + 1) % CP_HANDOFF_BLOCKS) {
    if (r) wait_free(h, b); /* block 0 is the one the open left FILLING */
    cp_handoff_block_head *head = &h->heads[b];
    uint32_t n = 1 + (uint32_t)(rnd() % MAX_GOOD), first, kind = r ? (uint32_t)(rnd() % 5) : 0;
    /* Each change the owner may see is one store: a head that went back to a valid one after the owner dropped
     * it would be taken again. A lying head is written while its state is still FREE, its state last. */
    if (kind < 4) {
      atomic_store(&head->count, 0);
      atomic_store(&head->state, CP_HANDOFF_FILLING);
    }
    switch (kind) {
      case 0: /* good, in one go */
      case 1:
        good_records(map, b, 0, n, &t);
        atomic_store(&head->count, n);
        atomic_store(&head->state, CP_HANDOFF_FULL);
        published += n;
        break;
      case 2: /* good, in two steps: the owner takes the first part while the block fills */
        first = n / 2;
        good_records(map, b, 0, first, &t);
        atomic_store(&head->count, first);
        wait_taken(h, published + first);
        good_records(map, b, first, n, &t);
        atomic_store(&head->count, n);
        atomic_store(&head->state, CP_HANDOFF_FULL);
        published += n;
        break;
      case 3: /* good records taken, then the count of the filling block goes back below them */
        good_records(map, b, 0, n, &t);
        atomic_store(&head->count, n);
        published += n;
        wait_taken(h, published);
        atomic_store(&head->count, n - 1 - (uint32_t)(rnd() % n));
        t.bad++;
        break;
      default: /* a lying head over random records */
        fill_random(cp__handoff_ids(map, b), (size_t)MAX_GOOD * 8);
        bad_head(head);
        t.bad++;
    }
    /* the owner attaches (copies and checks the header) before it takes the first block: until then the header
     * stays as the open wrote it, else the owner would refuse the file as garbage and never take its records */
    if (r == 0) wait_taken(h, published);
    if (rnd() % 16 == 0) /* the memory is sealed: a shrink, which would kill the owner with SIGBUS, fails */
      CHECK(ftruncate(fd, (off_t)(rnd() % CP_HANDOFF_FILE_BYTES)) != 0 && errno == EPERM);
    if (rnd() % 16 == 0) { /* the header's names and numbers, which the owner copied when it attached */
      fill_random(h->text, sizeof h->text);
      fill_random(&h->writer_pid, sizeof h->writer_pid);
      fill_random(&h->n_meta, sizeof h->n_meta);
      fill_random(h->params, sizeof h->params);
    }
    if (rnd() % 8 == 0) /* a flush request that lies: the owner takes filling blocks early, or waits for them */
      atomic_store(&h->wanted, rnd() % 2 ? rnd() : 0);
  }
  wait_taken(h, published);
  CHECK(write(out, &t, sizeof t) == sizeof t);
  atomic_store(&h->closed, 1);
  _exit(0);
}

/* Whether stray i is a hand-off in all but its seal: the owner opens its channel only to count it as refused. */
static bool unsealed(int i) { return i % 3 != 0 && i % 2 && i % 5 == 4 && i % 7 != 6; }

/* Names that name no hand-off memory, or memory that is not a hand-off's or lies in its header: random text,
 * memory of random sizes, and the right size with the right magic over random fields (a pid of its own, its own
 * start time, so that some attach), sealed against shrinking or not (an unsealed one is refused and counted). */
static void strays(const char *inbox, int out) {
  char tmp[4096], path[4096], text[64];
  for (int i = 0; i < STRAY_FILES; i++) {
    snprintf(tmp, sizeof tmp, "%s/.stray-%d.tmp", inbox, i);
    snprintf(path, sizeof path, "%s/stray-%d" CP_HANDOFF_SUFFIX, inbox, i);
    int fd = memfd_create("stray", MFD_ALLOW_SEALING);
    CHECK(fd >= 0);
    bool sized = i % 3 != 0;
    CHECK(ftruncate(fd, sized ? (off_t)CP_HANDOFF_FILE_BYTES : (off_t)(rnd() % 100000)) == 0);
    if (i % 5 != 4) CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0); /* a hand-off's or unsealed(i) */
    static cp_handoff_header h;
    fill_random(&h, sizeof h);
    if (sized) {
      memcpy(h.magic, CP_HANDOFF_MAGIC, sizeof h.magic);
      h.blocks = CP_HANDOFF_BLOCKS;
      h.block_records = CP_HANDOFF_BLOCK_RECORDS;
      atomic_store(&h.closed, 0);
      if (i % 2) { /* a name, no metadata, a known handler: it attaches, then its heads lie */
        h.writer_pid = (int32_t)getpid();
        h.writer_start = cp__process_start(getpid());
        h.handler = CP_HANDLER_BUFFERED;
        h.n_params = h.n_meta = 0;
        snprintf(h.text, sizeof h.text, "stray-%d", i);
      }
    }
    size_t n = sized ? sizeof h : (size_t)(rnd() % 64);
    CHECK(pwrite(fd, &h, n, 0) == (ssize_t)n);
    size_t len = (size_t)snprintf(text, sizeof text, "/proc/%d/fd/%d\n", (int)getpid(), fd);
    if (i % 7 == 6) fill_random(text, len = 1 + rnd() % (sizeof text - 1)); /* a name that names nothing */
    int name = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    CHECK(name >= 0 && write(name, text, len) == (ssize_t)len && close(name) == 0 && rename(tmp, path) == 0);
  }
  CHECK(write(out, "d", 1) == 1);
  sleep(1); /* alive while the owner attaches; its memory goes with it */
  _exit(0);
}

/* A child forked before the owner starts its threads, started by a byte on `go`; its report comes on `out`. */
static pid_t child(void (*body)(const char *, int), const char *inbox, int *go, int *out) {
  int start[2], report[2];
  CHECK(pipe(start) == 0 && pipe(report) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    char byte;
    close(start[1]), close(report[0]);
    CHECK(read(start[0], &byte, 1) == 1);
    body(inbox, report[1]);
  }
  close(start[0]), close(report[1]);
  *go = start[1];
  *out = report[0];
  return pid;
}

int main(void) {
  const char *seed = getenv("CP_FUZZ_SEED");
  state = seed ? strtoull(seed, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
  if (!state) state = 1;
  printf("test_inbox_fuzz: seed %llu (CP_FUZZ_SEED repeats it)\n", (unsigned long long)state);
  fflush(stdout);
  char dir[] = "/tmp/cp_test_inbox_fuzz_XXXXXX";
  CHECK(mkdtemp(dir));
  char inbox[64];
  snprintf(inbox, sizeof inbox, "%s/inbox", dir);
  int go[2], out[2];
  pid_t kids[2] = {child(hostile, inbox, &go[0], &out[0]), child(strays, inbox, &go[1], &out[1])};
  cp_options o;
  cp_options_init(&o);
  o.log_dir = dir;
  cp_error err;
  CHECK(cp_start(&o, &err) == 0 && cp_inbox_start(inbox, &err) == 0);
  for (int i = 0; i < 2; i++) CHECK(write(go[i], "x", 1) == 1 && close(go[i]) == 0);
  tally t;
  char done;
  CHECK(read(out[0], &t, sizeof t) == sizeof t && read(out[1], &done, 1) == 1);
  for (int i = 0; i < 2; i++) {
    int status;
    CHECK(waitpid(kids[i], &status, 0) == kids[i] && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  cp_stop();

  ipc_file f;
  CHECK(rows_of(dir, "fuzz", &f) == (size_t)t.good);
  for (size_t i = 0; i < f.rows; i++) CHECK(f.col0[i] == (int64_t)i);
  CHECK(strtoull(ipc_footer_meta(&f, "handoff.rejected_blocks"), NULL, 10) == t.bad);
  ipc_free(&f);
  for (int i = 0; i < STRAY_FILES; i++) {
    if (!unsealed(i)) continue;
    char channel[32];
    snprintf(channel, sizeof channel, "stray-%d", i);
    CHECK(rows_of(dir, channel, &f) == 0 && strtoull(ipc_footer_meta(&f, "handoff.rejected_files"), NULL, 10) == 1);
    ipc_free(&f);
  }
  printf(
      "test_inbox_fuzz: %d rounds, %lld good records in order, %llu lying blocks dropped and counted, %d stray "
      "names (unsealed memory refused and counted): the owner lives\n",
      ROUNDS, (long long)t.good, (unsigned long long)t.bad, STRAY_FILES);
  return 0;
}
