/* The owner's side of hand-off channels (the format: handoff.h): one thread that finds the files writers create in
 * the inbox folder, takes their published records into channels of this library, and removes each file once its
 * writer has closed it or died and everything in it is taken. It sleeps on inotify while no file is open, and polls
 * the open files every millisecond while records come, backing off to 20 ms while none do.
 *
 * A buffered channel's records are not copied here: a full block goes to the compression threads as it lies in the
 * writer's memory (one job for its 32,768 records, the channel's current segment looked up once for them), and the
 * compression thread that has encoded it hands it back to the writer; the inbox takes the next blocks meanwhile.
 * Without that copy the executor keeps no blocks of its own for a worker's channel either. A block still filling is
 * taken only when its writer closed, died or asks for it (its flush), or once its records have waited the flush
 * interval, as a writer's partial block in this library does: one record batch per block, not one per poll. Other
 * handlers take every record as it comes, copied (cp_log_many_at): counters and downsampling count a record when it is
 * taken.
 *
 * A writer is another process (a Python worker running user code), so everything in its memory is untrusted: the
 * memory must be sealed against shrinking (else a truncate by the writer would make this process's next read of
 * the mapping raise SIGBUS, which in a JVM kills the executor); the header is copied once and checked before use,
 * and each block's state and count are checked against the block and against what was already taken; a block that
 * fails is dropped, counted in its channel's metadata (handoff.rejected_blocks, its records in records.dropped) and
 * said once per writer, and the blocks after it are taken as usual.
 *
 * Why a seal rather than the alternatives: a check of the file's size before each read (fstat) leaves the writer
 * the time between the check and the read; a SIGBUS handler around the reads would have to chain with the JVM's
 * own handler for the same signal, which the JVM relies on; an owner that made each writer's memory would need a
 * pool made ahead of the writers' opens and a way to hand it over. No process can shrink a memfd that its writer
 * sealed (F_SEAL_SHRINK); the owner asks the kernel (F_GET_SEALS) about the very file it maps, so it trusts no
 * word of the writer's; and the mapping and the records' path stay as fast as before. The writer names its memory
 * by a small file in the folder holding "/proc/<pid>/fd/<fd>", which this user's processes may open. */
#define _GNU_SOURCE /* pipe2, F_GET_SEALS */
#include "handoff.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct source;

/* Who still needs a block of the writer's memory: the inbox while it takes from it, and each range of it on its way
 * to the file in place until a compression thread has encoded it. The last one hands the block back to the writer. */
typedef struct block_use {
  struct source *source;
  _Atomic uint32_t refs;
  _Atomic bool free; /* handed back: the inbox may take from it again (its next round) */
} block_use;

typedef struct source {
  struct source *next;
  char *path;
  cp_handoff_header *header;
  cp_channel *channel;
  uint32_t block;      /* the block to take from next */
  uint32_t taken;      /* records of it already taken */
  bool holding;        /* the inbox holds a reference to `block` */
  uint64_t total;      /* records taken */
  uint64_t waiting_ns; /* since when records of a filling block wait untaken; 0: none do */
  uint64_t checked_ns; /* when the writer was last found alive */
  int32_t writer_pid;  /* the header's, as checked at attach: the writer cannot change them afterwards */
  uint64_t writer_start;
  bool said;               /* a rejected block of this writer was logged */
  _Atomic uint32_t ranges; /* of all blocks, not yet encoded: the memory stays mapped until none is left */
  block_use uses[CP_HANDOFF_BLOCKS];
} source;

static struct {
  pthread_mutex_t mutex; /* start and stop */
  bool running;
  char *dir;
  pthread_t thread;
  int wake[2]; /* a byte here stops the thread */
  int notify;  /* inotify on the folder, or -1: then the thread polls it every 20 ms */
  source *sources;
  source *draining; /* finished, their memory mapped until the ranges in it are encoded */
} inbox = {.mutex = PTHREAD_MUTEX_INITIALIZER, .wake = {-1, -1}, .notify = -1};

enum { POLL_FAST_MS = 1, POLL_SLOW_MS = 20, ALIVE_CHECK_NS = 100000000 };

static bool known(const char *path) {
  for (source *s = inbox.sources; s; s = s->next)
    if (strcmp(s->path, path) == 0) return true;
  return false;
}

/* The writer's name and metadata pairs out of the header's text, plus handoff.pid; false when malformed. */
static bool read_text(const cp_handoff_header *h, const char **name, const char **keys, const char **values, size_t *n,
                      char *pid) {
  if (h->n_meta > CP_HANDOFF_META_MAX || memchr(h->text, '\0', sizeof h->text) == NULL) return false;
  const char *p = h->text, *end = h->text + sizeof h->text;
  *name = p;
  p += strlen(p) + 1;
  for (uint32_t i = 0; i < 2 * h->n_meta; i++) {
    if (p >= end || !memchr(p, '\0', (size_t)(end - p))) return false;
    (i % 2 ? values : keys)[i / 2] = p;
    p += strlen(p) + 1;
  }
  keys[h->n_meta] = "handoff.pid";
  values[h->n_meta] = pid;
  *n = h->n_meta + 1;
  return true;
}

static cp_channel *open_channel(const cp_handoff_header *h, cp_error *error) {
  const char *name, *keys[CP_HANDOFF_META_MAX + 1], *values[CP_HANDOFF_META_MAX + 1];
  char pid[16];
  size_t n;
  snprintf(pid, sizeof pid, "%d", (int)h->writer_pid);
  if (!read_text(h, &name, keys, values, &n, pid))
    return cp__fail(error, EINVAL, "its name and metadata are malformed"), NULL;
  if (h->handler < 0) return cp_channel_open_by_rules(name, keys, values, n, error);
  if (h->n_params > 3) return cp__fail(error, EINVAL, "it gives %u parameters", h->n_params), NULL;
  return cp_channel_open(name, (cp_handler)h->handler, h->params, h->n_params, keys, values, n, error);
}

/* Opens the memory the name at `path` points to. Its text must be exactly "/proc/<pid>/fd/<fd>\n" (sets *pid), and
 * what that opens a regular file of this user with a hand-off's size, checked before it is opened (no FIFO or
 * device) and again after (the same file). -1 with `error` set, ENOENT when the name went meanwhile. */
static int open_memory(const char *path, int *pid, cp_error *error) {
  char text[64], proc[64];
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK), number = -1;
  if (fd < 0) return cp__fail(error, errno, "%s", strerror(errno)), -1;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  text[n > 0 ? n : 0] = '\0';
  if (sscanf(text, "/proc/%d/fd/%d", pid, &number) != 2 || *pid <= 0 || number < 0 ||
      snprintf(proc, sizeof proc, "/proc/%d/fd/%d\n", *pid, number) < 0 || strcmp(proc, text) != 0)
    return cp__fail(error, EINVAL, "not a hand-off file of this version"), -1;
  proc[strlen(proc) - 1] = '\0';
  struct stat named, opened;
  if (stat(proc, &named) != 0) return cp__fail(error, EINVAL, "its memory %s: %s", proc, strerror(errno)), -1;
  if (!S_ISREG(named.st_mode) || named.st_uid != geteuid() || (size_t)named.st_size != CP_HANDOFF_FILE_BYTES)
    return cp__fail(error, EINVAL, "its memory %s is not a hand-off's", proc), -1;
  fd = open(proc, O_RDWR | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return cp__fail(error, EINVAL, "its memory %s: %s", proc, strerror(errno)), -1;
  if (fstat(fd, &opened) != 0 || opened.st_dev != named.st_dev || opened.st_ino != named.st_ino)
    return close(fd), cp__fail(error, EINVAL, "its memory %s changed while it was opened", proc), -1;
  return fd;
}

/* Removes a name the inbox does not take, saying why: the writer's open, which waits for the owner, fails at once. */
static void refuse(const char *path, int pid, const char *why) {
  if (pid > 0) fprintf(stderr, "cloudprofiler: inbox removes %s (Python worker pid %d): %s\n", path, pid, why);
  else fprintf(stderr, "cloudprofiler: inbox removes %s: %s\n", path, why);
  unlink(path);
}

/* The header of the memory at fd, read with pread (it cannot fault, whatever the writer does to the memory) into
 * `copy` once and checked: the writer may change the mapped one at any moment, between a check and its use. */
static int read_header(int fd, int pid, cp_handoff_header *copy, cp_error *error) {
  if (pread(fd, copy, sizeof *copy, 0) != (ssize_t)sizeof *copy ||
      memcmp(copy->magic, CP_HANDOFF_MAGIC, sizeof copy->magic) != 0 || copy->blocks != CP_HANDOFF_BLOCKS ||
      copy->block_records != CP_HANDOFF_BLOCK_RECORDS)
    return cp__fail(error, EINVAL, "not a hand-off file of this version");
  if (copy->writer_pid != pid)
    return cp__fail(error, EINVAL, "its header names writer pid %d, its memory is pid %d's", (int)copy->writer_pid,
                    pid);
  return 0;
}

/* Maps a writer's memory and opens its channel; a name that is not one is removed, saying so. Memory that is not
 * sealed against shrinking is never mapped, since a writer that shrank it would kill this process with SIGBUS at
 * its next read: its channel is opened only to count it (handoff.rejected_files, so that the analysis names the
 * worker) and closed. */
static void attach(const char *path) {
  cp_error error = {0};
  int pid = 0, fd = open_memory(path, &pid, &error);
  if (fd < 0) {
    if (error.code != ENOENT) refuse(path, pid, error.message); /* ENOENT: its writer gave up on it meanwhile */
    return;
  }
  static cp_handoff_header copy; /* 16 kB of text: not on the stack; only the inbox thread attaches */
  int seals = fcntl(fd, F_GET_SEALS);
  cp_channel *channel = read_header(fd, pid, &copy, &error) ? NULL : open_channel(&copy, &error);
  void *map = MAP_FAILED;
  if (channel && (seals < 0 || !(seals & F_SEAL_SHRINK))) {
    atomic_fetch_add(&atomic_load(&channel->current)->rejected_files, 1);
    cp__fail(&error, EPERM,
             "its memory is not sealed against shrinking (F_SEAL_SHRINK), and a shrink under the mapping would "
             "kill this process (SIGBUS): refused, counted in its channel's handoff.rejected_files");
  } else if (channel) {
    /* its pages exist (the writer reserved them), mapped as they are read: the writer's touch zeroed them */
    map = mmap(NULL, CP_HANDOFF_FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) cp__fail(&error, errno, "cannot map its memory: %s", strerror(errno));
  }
  close(fd);
  source *s = map != MAP_FAILED ? calloc(1, sizeof *s) : NULL;
  if (s) s->path = strdup(path);
  if (!s || !s->path) {
    refuse(path, pid, map != MAP_FAILED ? "out of memory" : error.message);
    if (channel) cp_channel_close(channel, NULL);
    if (s) free(s);
    if (map != MAP_FAILED) munmap(map, CP_HANDOFF_FILE_BYTES);
    return;
  }
  s->header = map;
  for (uint32_t b = 0; b < CP_HANDOFF_BLOCKS; b++) s->uses[b].source = s, s->uses[b].free = true;
  s->channel = channel;
  s->writer_pid = copy.writer_pid;
  s->writer_start = copy.writer_start;
  s->checked_ns = cp__monotonic_ns();
  s->next = inbox.sources;
  inbox.sources = s;
  atomic_store(&s->header->attached, 1); /* the writer's open returns */
  cp__futex_wake(&s->header->attached);
}

static void scan(void) {
  DIR *d = opendir(inbox.dir);
  if (!d) return;
  char path[4096];
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name), suffix = strlen(CP_HANDOFF_SUFFIX);
    if (e->d_name[0] == '.' || len <= suffix || strcmp(e->d_name + len - suffix, CP_HANDOFF_SUFFIX) != 0) continue;
    if (snprintf(path, sizeof path, "%s/%s", inbox.dir, e->d_name) >= (int)sizeof path || known(path)) continue;
    attach(path);
  }
  closedir(d);
}

/* Drops s's current block, which its writer published malformed: counts it in the channel's current file (its
 * records, at most what the block holds, as logged and dropped, as for the writer's own drops), says so once per
 * writer. */
static void reject(source *s, uint32_t state, uint32_t count) {
  uint32_t lost = (count > CP_HANDOFF_BLOCK_RECORDS ? CP_HANDOFF_BLOCK_RECORDS : count);
  lost = lost > s->taken ? lost - s->taken : 0;
  cp_channel *current = atomic_load(&s->channel->current);
  atomic_fetch_add(&current->rejected_blocks, 1);
  atomic_fetch_add(&current->late, lost);
  if (!s->said)
    fprintf(stderr,
            "cloudprofiler: inbox drops a malformed block of %s (Python worker pid %d): state %u, count %u of %u "
            "records, %u taken before; further ones are counted in its handoff.rejected_blocks\n",
            s->path, (int)s->writer_pid, state, count, (unsigned)CP_HANDOFF_BLOCK_RECORDS, s->taken);
  s->said = true;
}

/* Drops a reference to a block; the last one hands it back to the writer (FREE), then lets the inbox take from it
 * again: the inbox never reads the state of a round it already took. */
static void block_release(block_use *use) {
  if (atomic_fetch_sub_explicit(&use->refs, 1, memory_order_acq_rel) != 1) return;
  cp_handoff_header *h = use->source->header;
  _Atomic uint32_t *state = &h->heads[use - use->source->uses].state;
  atomic_store(state, CP_HANDOFF_FREE); /* before `waiting` is read: see handoff.c's wait_free */
  if (atomic_load(&h->waiting)) cp__futex_wake(state);
  atomic_store_explicit(&use->free, true, memory_order_release);
}

/* A compression thread encoded a range in place: the last access to the source it makes is the count of ranges. */
static void range_encoded(void *arg) {
  block_use *use = arg;
  source *s = use->source;
  block_release(use);
  atomic_fetch_sub_explicit(&s->ranges, 1, memory_order_release);
}

/* Takes records [s->taken, count) of s's current block: in place for a buffered channel, else copied. */
static void take_range(source *s, uint32_t count) {
  const int64_t *ids = cp__handoff_ids(s->header, s->block) + s->taken;
  const uint64_t *tscs = cp__handoff_tscs(s->header, s->block) + s->taken;
  uint32_t n = count - s->taken;
  block_use *use = &s->uses[s->block];
  atomic_fetch_add(&use->refs, 1);
  atomic_fetch_add(&s->ranges, 1);
  if (!cp__log_many_in_place(s->channel, ids, tscs, n, range_encoded, use)) {
    cp_log_many_at(s->channel, ids, tscs, n);
    range_encoded(use);
  }
  s->taken = count;
  s->total += n;
}

/* Takes what s's writer published, in full blocks, and the records of a block still filling when `all` or the
 * channel takes every record as it comes (not buffered); returns how many records it took. The state and count are
 * checked against the block and against what was taken of it: a block that fails is dropped (reject). At most every
 * block once: a writer's memory cannot keep this thread here. *pending: it stopped at a block whose last round is
 * still on its way back to the writer, which may have filled it again meanwhile (the writer sees the block free a
 * moment before this side may take it again): a closed writer is finished only once nothing is pending. */
static uint64_t take(source *s, bool all, uint64_t now, bool *pending) {
  cp_handoff_header *h = s->header;
  uint64_t before = s->total;
  bool buffered = atomic_load(&atomic_load(&s->channel->current)->handler) == CP_HANDLER_BUFFERED;
  *pending = false;
  for (uint32_t turns = 0; turns < CP_HANDOFF_BLOCKS; turns++) {
    block_use *use = &s->uses[s->block];
    if (!s->holding) { /* a new round of this block: once its last one went back to the writer */
      if (!atomic_load_explicit(&use->free, memory_order_acquire)) {
        *pending = true;
        break;
      }
      atomic_store_explicit(&use->free, false, memory_order_relaxed);
      atomic_store_explicit(&use->refs, 1, memory_order_relaxed);
      s->holding = true;
    }
    cp_handoff_block_head *head = &h->heads[s->block];
    uint32_t state = atomic_load_explicit(&head->state, memory_order_acquire);
    if (state == CP_HANDOFF_FREE) break;
    uint32_t count = atomic_load_explicit(&head->count, memory_order_acquire);
    bool valid = (state == CP_HANDOFF_FILLING || state == CP_HANDOFF_FULL) && count <= CP_HANDOFF_BLOCK_RECORDS &&
                 count >= s->taken;
    if (valid && state == CP_HANDOFF_FILLING) {
      if (count > s->taken && (all || !buffered)) take_range(s, count);
      s->waiting_ns = count > s->taken ? (s->waiting_ns ? s->waiting_ns : now) : 0;
      break;
    }
    if (valid && count > s->taken) take_range(s, count);
    if (!valid) reject(s, state, count);
    s->taken = 0;
    s->waiting_ns = 0;
    s->holding = false;
    block_release(use);
    s->block = (s->block + 1) % CP_HANDOFF_BLOCKS;
  }
  if (s->total > before) atomic_fetch_add(&h->taken, s->total - before);
  return s->total - before;
}

static bool writer_gone(source *s, uint64_t now) {
  if (now - s->checked_ns < ALIVE_CHECK_NS) return false;
  s->checked_ns = now;
  return (kill(s->writer_pid, 0) != 0 && errno == ESRCH) || cp__process_start(s->writer_pid) != s->writer_start;
}

static void unmap(source *s) {
  munmap(s->header, CP_HANDOFF_FILE_BYTES);
  free(s);
}

/* Unmaps the memory of finished writers whose ranges are encoded (all of them when `wait`, at stop). */
static void drain(bool wait) {
  struct timespec nap = {0, 100000};
  for (source **link = &inbox.draining; *link;) {
    source *s = *link;
    if (atomic_load_explicit(&s->ranges, memory_order_acquire)) {
      if (wait) nanosleep(&nap, NULL);
      else link = &s->next;
      continue;
    }
    *link = s->next;
    unmap(s);
  }
}

/* The writer's drops go into the counts of the channel's current file as calls logged and dropped (what `late`
 * counts), so that its records.logged = records.written + records.dropped as for any channel. Its memory stays
 * mapped while ranges in it wait for a compression thread (a segment the rules retired is closed later). */
static void finish(source *s) {
  uint64_t dropped = atomic_load(&s->header->dropped);
  if (dropped) atomic_fetch_add(&atomic_load(&s->channel->current)->late, dropped);
  cp_error error;
  if (cp_channel_close(s->channel, &error) && error.code != EBADF)
    fprintf(stderr, "cloudprofiler: inbox closing channel of %s: %s\n", s->path, error.message);
  unlink(s->path);
  free(s->path);
  s->next = inbox.draining;
  inbox.draining = s;
}

/* One pass over the open files: takes what is published, finishes those whose writer closed or died (or all of
 * them, at stop) once none waits for a block on its way back. Returns the records taken. */
static uint64_t pass(bool stopping) {
  uint64_t n = 0, now = cp__monotonic_ns();
  uint64_t flush_ns = (uint64_t)cp__lib.options.flush_interval_ms * 1000000u;
  for (source **link = &inbox.sources; *link;) {
    source *s = *link;
    bool closed = atomic_load_explicit(&s->header->closed, memory_order_acquire); /* before its last records */
    bool all = closed || stopping || atomic_load_explicit(&s->header->wanted, memory_order_acquire) > s->total ||
               (flush_ns && s->waiting_ns && now - s->waiting_ns >= flush_ns);
    bool pending;
    uint64_t taken = take(s, all, now, &pending);
    n += taken;
    bool ended = closed || stopping || (!taken && writer_gone(s, now));
    if (ended && !closed) n += take(s, true, now, &pending); /* a writer found dead: what it published after */
    if (ended && !pending) {
      *link = s->next;
      finish(s);
    } else {
      link = &s->next;
    }
  }
  drain(stopping);
  return n;
}

static void *inbox_main(void *arg) {
  (void)arg;
  int wait_ms = POLL_SLOW_MS;
  scan();
  for (;;) {
    struct pollfd fds[2] = {{.fd = inbox.wake[0], .events = POLLIN}, {.fd = inbox.notify, .events = POLLIN}};
    /* nothing open or being encoded: sleep until a file comes */
    int timeout = inbox.sources || inbox.draining || inbox.notify < 0 ? wait_ms : -1;
    int ready = poll(fds, inbox.notify >= 0 ? 2 : 1, timeout);
    if (ready > 0 && (fds[0].revents & POLLIN)) break;
    if (inbox.notify < 0 || (ready > 0 && (fds[1].revents & POLLIN))) {
      char events[4096];
      while (inbox.notify >= 0 && read(inbox.notify, events, sizeof events) > 0) continue;
      scan();
    }
    wait_ms = pass(false) ? POLL_FAST_MS : (wait_ms * 2 > POLL_SLOW_MS ? POLL_SLOW_MS : wait_ms * 2);
  }
  scan();
  /* at stop, until every writer is finished: a block on its way back comes within an encoding's time */
  struct timespec nap = {0, 100000};
  for (uint32_t waited = 0; pass(true), inbox.sources && waited < CP_HANDOFF_WAIT_MS * 10; waited++)
    nanosleep(&nap, NULL);
  return NULL;
}

static int write_owner(const char *dir, cp_error *error) {
  char path[4096], tmp[4096];
  snprintf(path, sizeof path, "%s/" CP_INBOX_OWNER, dir);
  snprintf(tmp, sizeof tmp, "%s/." CP_INBOX_OWNER ".%d.tmp", dir, (int)getpid());
  unlink(tmp); /* one a killed owner of this pid left */
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    int code = errno;
    if (fd >= 0) close(fd), unlink(tmp);
    return cp__fail(error, code, "cannot write %s: %s", tmp, strerror(code));
  }
  fprintf(f, "%d %llu\n", (int)getpid(), (unsigned long long)cp__process_start(getpid()));
  if (fclose(f) != 0 || rename(tmp, path) != 0) {
    int code = errno;
    unlink(tmp);
    return cp__fail(error, code, "cannot write %s: %s", path, strerror(code));
  }
  return 0;
}

static void close_fds(void) {
  for (int i = 0; i < 2; i++)
    if (inbox.wake[i] >= 0) close(inbox.wake[i]), inbox.wake[i] = -1;
  if (inbox.notify >= 0) close(inbox.notify), inbox.notify = -1;
}

int cp_inbox_start(const char *dir, cp_error *error) {
  if (!dir || !*dir) return cp__fail(error, EINVAL, "inbox folder is empty");
  int rc = cp__ensure_started(error);
  if (rc) return rc;
  pthread_mutex_lock(&inbox.mutex);
  if (inbox.running) {
    rc = cp__fail(error, EALREADY, "an inbox already runs in %s", inbox.dir);
  } else if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    rc = cp__fail(error, errno, "cannot create inbox folder %s: %s", dir, strerror(errno));
  } else if (!(rc = cp__handoff_folder_check(dir, error)) && !(rc = write_owner(dir, error))) {
    inbox.dir = strdup(dir);
    inbox.notify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (inbox.notify >= 0 && inotify_add_watch(inbox.notify, dir, IN_MOVED_TO | IN_CREATE) < 0)
      close(inbox.notify), inbox.notify = -1;
    if (!inbox.dir || pipe2(inbox.wake, O_CLOEXEC) != 0 || pthread_create(&inbox.thread, NULL, inbox_main, NULL)) {
      rc = cp__fail(error, EAGAIN, "cannot start the inbox thread");
      close_fds();
      free(inbox.dir);
      inbox.dir = NULL;
    } else {
      inbox.running = true;
    }
  }
  pthread_mutex_unlock(&inbox.mutex);
  return rc;
}

const char *cp_inbox_dir(void) { return inbox.running ? inbox.dir : NULL; }

void cp__inbox_stop(void) {
  pthread_mutex_lock(&inbox.mutex);
  if (inbox.running) {
    char owner[4096];
    snprintf(owner, sizeof owner, "%s/" CP_INBOX_OWNER, inbox.dir);
    unlink(owner); /* no writer opens a file from now on */
    ssize_t wrote = write(inbox.wake[1], "x", 1);
    (void)wrote;
    pthread_join(inbox.thread, NULL);
    close_fds();
    rmdir(inbox.dir); /* fails, keeping them, if files came after the last scan */
    free(inbox.dir);
    inbox.dir = NULL;
    inbox.running = false;
  }
  pthread_mutex_unlock(&inbox.mutex);
}

void cp__inbox_forget(void) {
  inbox.running = false;
  inbox.sources = inbox.draining = NULL;
  inbox.dir = NULL;
  inbox.wake[0] = inbox.wake[1] = inbox.notify = -1;
  pthread_mutex_init(&inbox.mutex, NULL);
}
