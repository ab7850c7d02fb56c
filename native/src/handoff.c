/* The writer's side of a hand-off channel (the format: handoff.h; the owner's side: inbox.c). Nothing here starts
 * the library: a writer has no thread and no file of its own. */
#define _GNU_SOURCE /* memfd_create, F_ADD_SEALS */
#include "handoff.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct cp_handoff {
  pthread_mutex_t mutex; /* the writer's threads; never held across processes */
  cp_handoff_header *header;
  void *map;
  char *path;     /* the name in the inbox folder */
  int fd;         /* the memory's, open while the channel is: the owner opens /proc/<pid>/fd/<fd> */
  uint32_t block; /* the block being filled */
  uint32_t count; /* records in it */
  bool stalled;   /* no block was free at the last hand-off: records are dropped until one is */
  uint64_t logged;
};

void cp__futex_wait(_Atomic uint32_t *word, uint32_t value, uint64_t timeout_ns) {
  struct timespec timeout = {(time_t)(timeout_ns / 1000000000u), (long)(timeout_ns % 1000000000u)};
  syscall(SYS_futex, word, FUTEX_WAIT, value, &timeout, NULL, 0); /* EAGAIN, EINTR, ETIMEDOUT: the caller looks */
}

void cp__futex_wake(_Atomic uint32_t *word) { syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0); }

uint64_t cp__monotonic_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

uint64_t cp__process_start(int pid) {
  char path[64], text[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  char *p = strrchr(text, ')'); /* the command may hold spaces and parentheses */
  if (!p) return 0;
  unsigned long long start = 0;
  /* after ")": state (field 3) ... starttime (field 22) */
  if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &start) != 1)
    return 0;
  return start;
}

int cp__handoff_folder_check(const char *dir, cp_error *error) {
  struct stat st;
  if (lstat(dir, &st) != 0) return cp__fail(error, errno, "inbox folder %s: %s", dir, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return cp__fail(error, ENOTDIR, "inbox folder %s is not a folder (a link or a file): refused", dir);
  if (st.st_uid != geteuid())
    return cp__fail(error, EACCES, "inbox folder %s belongs to user %u, not to this one (%u): refused", dir,
                    (unsigned)st.st_uid, (unsigned)geteuid());
  if (st.st_mode & 077)
    return cp__fail(error, EACCES,
                    "inbox folder %s has mode %03o, which lets other users read or inject records: refused", dir,
                    (unsigned)(st.st_mode & 0777));
  return 0;
}

/* Whether the folder's owner runs: its file names a live process with the start time it had. */
static bool owner_alive(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/" CP_INBOX_OWNER, dir);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  int pid = 0;
  unsigned long long start = 0;
  bool read = fscanf(f, "%d %llu", &pid, &start) == 2;
  fclose(f);
  return read && pid > 0 && cp__process_start(pid) == start;
}

static int text_append(char *text, size_t *used, const char *value, cp_error *error) {
  size_t n = strlen(value) + 1;
  if (*used + n > CP_HANDOFF_TEXT_MAX)
    return cp__fail(error, EINVAL, "hand-off channel: name and metadata exceed %d bytes", CP_HANDOFF_TEXT_MAX);
  memcpy(text + *used, value, n);
  *used += n;
  return 0;
}

static int fill_header(cp_handoff_header *h, const char *name, const cp_handler *handler, const int64_t *params,
                       size_t n_params, const char *const *keys, const char *const *values, size_t n_meta,
                       cp_error *error) {
  memcpy(h->magic, CP_HANDOFF_MAGIC, sizeof h->magic);
  h->blocks = CP_HANDOFF_BLOCKS;
  h->block_records = CP_HANDOFF_BLOCK_RECORDS;
  h->writer_pid = (int32_t)getpid();
  h->writer_start = cp__process_start(h->writer_pid);
  h->handler = handler ? (int32_t)*handler : -1;
  for (size_t i = 0; i < n_params; i++) h->params[i] = params[i];
  h->n_params = (uint32_t)n_params;
  h->n_meta = (uint32_t)n_meta;
  size_t used = 0;
  int rc = text_append(h->text, &used, name, error);
  for (size_t i = 0; !rc && i < n_meta; i++)
    if (!(rc = text_append(h->text, &used, keys[i], error))) rc = text_append(h->text, &used, values[i], error);
  atomic_store(&h->heads[0].state, CP_HANDOFF_FILLING);
  return rc;
}

/* The shared memory: a memfd sealed against shrinking, its space reserved, mapped. The owner maps it too, and a
 * mapping whose file shrank kills the process that reads past the new end with SIGBUS: a writer runs user code (a
 * Python UDF) that could truncate a file of /dev/shm and so take the executor down. A seal is the kernel's promise
 * that no process can shrink the memory any more, which the owner checks itself (inbox.c) rather than trusting the
 * writer; only a memfd takes seals. Its space is reserved because a page first touched when memory is short would
 * kill the writer with SIGBUS. The descriptor stays open while the channel is: the owner opens the memory through
 * /proc/<pid>/fd/<fd>. */
static int create_memory(cp_handoff *w, cp_error *error) {
  w->fd = memfd_create("cloudprofiler-handoff", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (w->fd < 0) return cp__fail(error, errno, "cannot create hand-off memory: %s", strerror(errno));
  int rc = fchmod(w->fd, 0600) ? errno : posix_fallocate(w->fd, 0, (off_t)CP_HANDOFF_FILE_BYTES);
  if (rc)
    return cp__fail(error, rc, "cannot reserve %zu bytes of hand-off memory: %s", (size_t)CP_HANDOFF_FILE_BYTES,
                    strerror(rc));
  if (fcntl(w->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return cp__fail(error, errno, "cannot seal hand-off memory: %s", strerror(errno));
  /* not populated: the pages exist, but the kernel zeroes each at its first touch, and a populated map zeroed all
   * 4 MiB at the open (1 ms of its 2.7 ms here, and the owner's map 0.2 ms more), where a task's channel of a few
   * hundred records (a Python UDF's timing) touches a page or two; a page's first touch costs 1 us, 4 ns a record */
  void *map = mmap(NULL, CP_HANDOFF_FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd, 0);
  if (map == MAP_FAILED) return cp__fail(error, errno, "cannot map hand-off memory: %s", strerror(errno));
  w->map = map;
  w->header = map;
  return 0;
}

/* Names the memory in the inbox folder: `path` holds "/proc/<pid>/fd/<fd>", written under `tmp` and renamed, so
 * that the owner reads only whole names. */
static int announce(cp_handoff *w, const char *tmp, cp_error *error) {
  char text[64];
  int n = snprintf(text, sizeof text, "/proc/%d/fd/%d\n", (int)getpid(), w->fd);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return cp__fail(error, errno, "cannot create hand-off file %s: %s", tmp, strerror(errno));
  int code = write(fd, text, (size_t)n) == n ? 0 : errno;
  if (close(fd) != 0 && !code) code = errno;
  if (!code && rename(tmp, w->path) != 0) code = errno;
  if (code) {
    unlink(tmp);
    return cp__fail(error, code, "cannot name hand-off file %s: %s", w->path, strerror(code));
  }
  return 0;
}

/* Waits until the owner has mapped the memory (its inbox thread wakes on the new name, maps it and wakes this
 * side): a writer that closed or died before then would take its records with it. The owner removes a name it
 * refuses, without a wake-up: then ECONNREFUSED within a millisecond; ETIMEDOUT after CP_HANDOFF_WAIT_MS. */
static int wait_attached(cp_handoff *w, cp_error *error) {
  uint64_t deadline = cp__monotonic_ns() + (uint64_t)CP_HANDOFF_WAIT_MS * 1000000u;
  while (!atomic_load(&w->header->attached)) {
    if (access(w->path, F_OK) != 0)
      return cp__fail(error, ECONNREFUSED, "the inbox refused hand-off channel %s (its owner's log says why)", w->path);
    if (cp__monotonic_ns() >= deadline) {
      unlink(w->path);
      return cp__fail(error, ETIMEDOUT, "the inbox did not take hand-off channel %s within %d ms", w->path,
                      CP_HANDOFF_WAIT_MS);
    }
    cp__futex_wait(&w->header->attached, 0, 1000000);
  }
  return 0;
}

static void discard(cp_handoff *w) {
  if (w->map) munmap(w->map, CP_HANDOFF_FILE_BYTES);
  if (w->fd >= 0) close(w->fd);
  free(w->path);
  free(w);
}

cp_handoff *cp_handoff_open(const char *dir, const char *name, const cp_handler *handler, const int64_t *params,
                            size_t n_params, const char *const *meta_keys, const char *const *meta_values,
                            size_t n_meta, cp_error *error) {
  static _Atomic uint64_t files;
  if (!dir) return cp__fail(error, EINVAL, "hand-off channel: inbox folder is NULL"), NULL;
  if (cp__channel_args_check(name, meta_keys, meta_values, n_meta, CP_HANDOFF_META_MAX, error)) return NULL;
  if (handler && cp_handler_check(*handler, params, n_params, error)) return NULL;
  if (!handler && n_params)
    return cp__fail(error, EINVAL, "hand-off channel: parameters given without a handler"), NULL;
  if (cp__handoff_folder_check(dir, error)) return NULL;
  if (!owner_alive(dir)) return cp__fail(error, ENOENT, "no running inbox owns %s", dir), NULL;
  char tmp[4096], path[4096];
  unsigned long long n = atomic_fetch_add(&files, 1);
  int len = snprintf(path, sizeof path, "%s/%d-%llu" CP_HANDOFF_SUFFIX, dir, (int)getpid(), n);
  if (len < 0 || (size_t)len >= sizeof path - 8)
    return cp__fail(error, EINVAL, "inbox folder path is too long: %s", dir), NULL;
  snprintf(tmp, sizeof tmp, "%s/.%d-%llu.tmp", dir, (int)getpid(), n);
  cp_handoff *w = calloc(1, sizeof *w);
  if (!w || !(w->path = strdup(path))) return free(w), cp__fail(error, ENOMEM, "out of memory"), NULL;
  w->fd = -1;
  pthread_mutex_init(&w->mutex, NULL);
  if (create_memory(w, error) ||
      fill_header(w->header, name, handler, params, n_params, meta_keys, meta_values, n_meta, error) ||
      announce(w, tmp, error) || wait_attached(w, error))
    return discard(w), NULL;
  return w;
}

/* Sleeps until the owner frees block b or CP_HANDOFF_WAIT_MS pass. `waiting` is set before the state is looked at
 * and the owner frees before it looks at `waiting` (both sequentially consistent): either this side sees the block
 * free or the owner sees it waiting and wakes it; the futex sleeps only while the state is still the one seen. */
static void wait_free(cp_handoff *w, uint32_t b) {
  _Atomic uint32_t *state = &w->header->heads[b].state;
  uint64_t deadline = cp__monotonic_ns() + (uint64_t)CP_HANDOFF_WAIT_MS * 1000000u;
  atomic_store(&w->header->waiting, 1);
  for (uint32_t seen; (seen = atomic_load(state)) != CP_HANDOFF_FREE;) {
    uint64_t now = cp__monotonic_ns();
    if (now >= deadline) break;
    cp__futex_wait(state, seen, deadline - now);
  }
  atomic_store(&w->header->waiting, 0);
}

/* Hands the full block to the owner and takes the next one if the owner has freed it, waiting up to
 * CP_HANDOFF_WAIT_MS when it was free last time; w->mutex held. */
static void next_block(cp_handoff *w) {
  cp_handoff_block_head *heads = w->header->heads;
  if (!w->stalled) atomic_store_explicit(&heads[w->block].state, CP_HANDOFF_FULL, memory_order_release);
  uint32_t next = (w->block + 1) % CP_HANDOFF_BLOCKS;
  if (atomic_load_explicit(&heads[next].state, memory_order_acquire) != CP_HANDOFF_FREE && !w->stalled)
    wait_free(w, next);
  if (atomic_load_explicit(&heads[next].state, memory_order_acquire) != CP_HANDOFF_FREE) {
    w->stalled = true;
    return;
  }
  atomic_store_explicit(&heads[next].count, 0, memory_order_relaxed);
  atomic_store_explicit(&heads[next].state, CP_HANDOFF_FILLING, memory_order_release);
  w->block = next;
  w->count = 0;
  w->stalled = false;
}

/* Whether the block being filled has room, moving to the next one when it is full; false (the record is dropped
 * and counted) while no block is free. w->mutex held. */
static inline bool room(cp_handoff *w) {
  if (CP_UNLIKELY(w->stalled || w->count == CP_HANDOFF_BLOCK_RECORDS)) {
    next_block(w);
    if (w->stalled) {
      atomic_fetch_add_explicit(&w->header->dropped, 1, memory_order_relaxed);
      return false;
    }
  }
  return true;
}

/* The count is stored with release after the columns: the owner reads whole records only. */
static inline void publish(cp_handoff *w, uint32_t n) {
  w->count += n;
  atomic_store_explicit(&w->header->heads[w->block].count, w->count, memory_order_release);
  w->logged += n;
}

void cp_handoff_log(cp_handoff *w, int64_t tuple_id) {
  uint64_t tsc = cp__tsc();
  pthread_mutex_lock(&w->mutex);
  if (room(w)) {
    cp__handoff_ids(w->map, w->block)[w->count] = tuple_id;
    cp__handoff_tscs(w->map, w->block)[w->count] = tsc;
    publish(w, 1);
  }
  pthread_mutex_unlock(&w->mutex);
}

/* One count store for each run of records that fits in a block, not one per record; `batch`: one TSC for them all,
 * read before the lock as cp_handoff_log's. */
static void log_ids(cp_handoff *w, const int64_t *ids, size_t n, bool batch) {
  uint64_t tsc = batch ? cp__tsc() : 0;
  pthread_mutex_lock(&w->mutex);
  for (size_t done = 0; done < n;) {
    if (!room(w)) {
      done++;
      continue;
    }
    size_t left = CP_HANDOFF_BLOCK_RECORDS - w->count, k = n - done < left ? n - done : left;
    int64_t *block_ids = cp__handoff_ids(w->map, w->block) + w->count;
    uint64_t *block_tscs = cp__handoff_tscs(w->map, w->block) + w->count;
    for (size_t i = 0; i < k; i++) {
      block_tscs[i] = batch ? tsc : cp__tsc();
      block_ids[i] = ids[done + i];
    }
    publish(w, (uint32_t)k);
    done += k;
  }
  pthread_mutex_unlock(&w->mutex);
}

void cp_handoff_log_many(cp_handoff *w, const int64_t *ids, size_t n) { log_ids(w, ids, n, false); }

void cp_handoff_log_batch(cp_handoff *w, const int64_t *ids, size_t n) { log_ids(w, ids, n, true); }

static uint64_t published(cp_handoff *w) {
  pthread_mutex_lock(&w->mutex);
  uint64_t n = w->logged;
  pthread_mutex_unlock(&w->mutex);
  return n;
}

int cp_handoff_flush(cp_handoff *w, uint32_t timeout_ms, cp_error *error) {
  uint64_t target = published(w);
  atomic_store_explicit(&w->header->wanted, target, memory_order_release); /* else the owner waits for a full block */
  struct timespec nap = {0, 200000};
  for (uint64_t waited_us = 0; atomic_load(&w->header->taken) < target; waited_us += 200) {
    if (waited_us >= (uint64_t)timeout_ms * 1000)
      return cp__fail(error, ETIMEDOUT, "hand-off channel %s: the owner took %llu of %llu records within %u ms",
                      w->path, (unsigned long long)atomic_load(&w->header->taken), (unsigned long long)target,
                      timeout_ms);
    nanosleep(&nap, NULL);
  }
  return 0;
}

void cp_handoff_stats_get(const cp_handoff *w, cp_handoff_stats *out) {
  out->logged = published((cp_handoff *)w);
  out->taken = atomic_load(&w->header->taken);
  out->dropped = atomic_load(&w->header->dropped);
}

const char *cp_handoff_path(const cp_handoff *w) { return w->path; }

void cp_handoff_close(cp_handoff *w) {
  pthread_mutex_lock(&w->mutex);
  atomic_store_explicit(&w->header->closed, 1, memory_order_release);
  pthread_mutex_unlock(&w->mutex);
  pthread_mutex_destroy(&w->mutex);
  discard(w);
}
