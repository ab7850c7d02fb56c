/* Library lifetime: options, start, the compression pool, the IO thread, the timer thread, flush and stop. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "handoff.h"
#include "writers.h"

void cp_options_init(cp_options *o) {
  memset(o, 0, sizeof *o);
  o->block_records = 65536;
  o->channel_blocks = 16;
  o->compression_threads = 1;
  o->compression = CP_COMPRESSION_NONE;
  o->zstd_level = 1;
  o->full_policy = CP_FULL_BLOCK;
  o->flush_interval_ms = 1000;
  o->roll_bytes = -1;
}

/* cp_options.roll_bytes as given, else $CLOUDPROFILER_ROLL_BYTES, else the default; EINVAL naming a bad value. */
static int roll_bytes(int64_t given, int64_t *out, cp_error *error) {
  const char *expected = "expected 0 (never) or a number of bytes from 65536";
  const char *text = getenv("CLOUDPROFILER_ROLL_BYTES");
  if (given == -1 && text && *text) {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (*end || errno || v < 0 || (v && v < CP_ROLL_BYTES_MIN))
      return cp__fail(error, EINVAL, "CLOUDPROFILER_ROLL_BYTES='%.100s' is invalid: %s", text, expected);
    given = v;
  } else if (given == -1) {
    given = CP_ROLL_BYTES_DEFAULT;
  }
  if (given < 0 || (given && given < CP_ROLL_BYTES_MIN))
    return cp__fail(error, EINVAL, "roll_bytes=%lld is out of range: %s", (long long)given, expected);
  *out = given;
  return 0;
}

/* Creates the log folder and its missing parents for this user only (0700), or takes an existing one that is this
 * user's and that not every user can write to (its group's writes are the owner's choice), or that root owns with
 * the sticky bit, like /tmp: in a folder another user can write, that user could read the files, or plant links at
 * their names. Never through a link. */
static int make_dirs(const char *path, cp_error *error) {
  char *copy = strdup(path);
  if (!copy) return cp__fail(error, ENOMEM, "out of memory");
  for (char *p = copy + 1;; p++) {
    if (*p == '/' || *p == '\0') {
      char saved = *p;
      *p = '\0';
      if (mkdir(copy, 0700) != 0 && errno != EEXIST) {
        int code = errno;
        free(copy);
        return cp__fail(error, code, "cannot create log folder %s: %s", path, strerror(code));
      }
      *p = saved;
      if (!saved) break;
    }
  }
  free(copy);
  struct stat st;
  if (lstat(path, &st) != 0) {
    int code = errno;
    return cp__fail(error, code, "cannot read log folder %s: %s", path, strerror(code));
  }
  if (!S_ISDIR(st.st_mode)) return cp__fail(error, ENOTDIR, "log folder %s is not a folder (a link?)", path);
  bool sticky = st.st_mode & S_ISVTX;
  if (st.st_uid == geteuid() ? !sticky && (st.st_mode & S_IWOTH) : !(st.st_uid == 0 && sticky))
    return cp__fail(
        error, EPERM,
        "refusing log folder %s: %s (mode %04o, owner uid %ld): other users could read or replace its files", path,
        st.st_uid == geteuid() ? "every user can write to it" : "it belongs to another user",
        (unsigned)(st.st_mode & 07777), (long)st.st_uid);
  if (access(path, W_OK | X_OK) != 0) {
    int code = errno;
    return cp__fail(error, code, "log folder %s is not writable: %s", path, strerror(code));
  }
  return 0;
}

static void job_free(cp_job *job) {
  free(job->message);
  free(job->owned);
  free(job);
}

static void *compress_main(void *arg) {
  (void)arg;
  cp_library *g = &cp__lib;
  pthread_mutex_lock(&g->queue_mutex);
  for (;;) {
    while (!g->compress_head && !g->stopping) pthread_cond_wait(&g->compress_cond, &g->queue_mutex);
    cp_job *job = g->compress_head;
    if (!job) break;
    g->compress_head = job->next;
    if (!g->compress_head) g->compress_tail = NULL;
    pthread_mutex_unlock(&g->queue_mutex);

    cp__channel_sample_rows(job->channel, job->col0, job->col1, job->rows); /* in-place rows: still valid here */
    cp_buf out = {0};
    if (cp__ipc_batch(&out, job->col0, job->col1, job->rows, g->options.compression, g->options.zstd_level) == 0) {
      job->message = out.data;
      job->message_len = out.len;
    } else {
      cp__buf_free(&out);
    }
    if (job->encoded) job->encoded(job->encoded_arg); /* the rows' memory may go: the message holds them */
    pthread_mutex_lock(&g->queue_mutex);
    cp__enqueue(&g->io_head, &g->io_tail, &g->io_cond, job);
  }
  pthread_mutex_unlock(&g->queue_mutex);
  return NULL;
}

/* Writes the channel's jobs that are next in sequence; called by the IO thread with ch->mutex held. */
static void write_in_order(cp_channel *ch) {
  for (;;) {
    cp_job **link = &ch->pending, *job = NULL;
    for (; *link; link = &(*link)->next)
      if ((*link)->seq == ch->written_seq) break;
    if (!(job = *link)) return;
    *link = job->next;
    if (job->message && cp__channel_write_message(ch, job->message, job->message_len) == 0) {
      atomic_fetch_add(&ch->written, job->rows);
    } else {
      atomic_fetch_add(&ch->dropped, job->rows); /* encoding or disk failure: counted, never silent */
    }
    if (job->block) cp__block_release(ch, job->block);
    job_free(job);
    ch->written_seq++;
    pthread_cond_broadcast(&ch->written_cond);
  }
}

static void *io_main(void *arg) {
  (void)arg;
  cp_library *g = &cp__lib;
  pthread_mutex_lock(&g->queue_mutex);
  for (;;) {
    while (!g->io_head && !g->stopping) pthread_cond_wait(&g->io_cond, &g->queue_mutex);
    cp_job *jobs = g->io_head;
    if (!jobs && g->stopping) break;
    g->io_head = g->io_tail = NULL;
    pthread_mutex_unlock(&g->queue_mutex);
    while (jobs) {
      cp_job *job = jobs;
      jobs = job->next;
      cp_channel *ch = job->channel;
      pthread_mutex_lock(&ch->mutex);
      job->next = ch->pending;
      ch->pending = job;
      write_in_order(ch);
      bool idle = ch->pending == NULL;
      pthread_mutex_unlock(&ch->mutex);
      if (idle && !jobs) cp__channel_write_header(ch);
    }
    pthread_mutex_lock(&g->queue_mutex);
  }
  pthread_mutex_unlock(&g->queue_mutex);
  return NULL;
}

/* Closes the segments that a switch retired a grace period ago (calls that loaded one before its switch have left
 * it by then), a few at a time, outside the library mutex; returns when the next one is due. */
static uint64_t close_retired(uint64_t now, uint64_t grace_ticks) {
  cp_channel *retired[16];
  size_t n = 0;
  uint64_t next = UINT64_MAX;
  pthread_mutex_lock(&cp__lib.mutex);
  for (cp_channel *ch = cp__lib.channels; ch; ch = ch->next_all) {
    uint64_t at = atomic_load(&ch->retired_tsc);
    if (!at || !atomic_load(&ch->open)) continue;
    uint64_t due = at + grace_ticks;
    if (now > due && n < 16) retired[n++] = ch;
    else if (due < next) next = due;
  }
  pthread_mutex_unlock(&cp__lib.mutex);
  for (size_t i = 0; i < n; i++) {
    cp_error error;
    int rc = cp_channel_close(retired[i], &error);
    if (rc && rc != EBADF)
      fprintf(stderr, "cloudprofiler: closing a segment of '%s': %s\n", retired[i]->name, error.message);
  }
  return next;
}

/* Samples counter channels at their period boundaries, hands off partial blocks every flush interval, rolls the
 * channels whose file passed the roll size (a write that passes it wakes the thread), closes retired segments,
 * releases what closed channels held and follows the rules file; sleeps in between. */
static void *timer_main(void *arg) {
  (void)arg;
  cp_library *g = &cp__lib;
  uint64_t flush_ticks = cp__ns_to_ticks((uint64_t)g->options.flush_interval_ms * 1000000ull);
  uint64_t next_flush = flush_ticks ? cp_tsc() + flush_ticks : UINT64_MAX;
  uint64_t grace_ticks = cp__ns_to_ticks(1000000000ull);
  double wake_ns = 1e9; /* wake at least every second to free closed channels' blocks */
  pthread_mutex_lock(&g->queue_mutex);
  while (!g->stopping) {
    pthread_mutex_unlock(&g->queue_mutex);
    if (cp__rules_file_poll()) wake_ns = 100e6; /* a change takes effect within about 0.2 s */
    uint64_t now = cp_tsc();
    uint64_t next = close_retired(now, grace_ticks);
    if (next_flush < next) next = next_flush;
    enum { ROLLS_PER_WAKE = 16 }; /* the rest at the next wake, which comes at once */
    cp_channel *rolls[ROLLS_PER_WAKE];
    size_t n_rolls = 0;
    pthread_mutex_lock(&g->mutex);
    for (cp_channel *ch = g->channels; ch; ch = ch->next_all) {
      if (ch->over_segments) { /* its segments are in the list */
        if (n_rolls < ROLLS_PER_WAKE && cp__handle_roll_due(ch)) rolls[n_rolls++] = ch;
        continue;
      }
      if (!atomic_load(&ch->open)) {
        uint64_t closed = atomic_load(&ch->closed_tsc);
        if (closed && now - closed > grace_ticks) {
          cp__channel_free_blocks(ch);
          if (ch->kind->release) ch->kind->release(ch);
        }
        continue;
      }
      if (atomic_load(&ch->retired_tsc)) continue; /* a counter's last period runs on to its close */
      if (ch->kind->sample) {
        uint64_t deadline = ch->kind->sample(ch, now);
        if (deadline < next) next = deadline;
      } else if (ch->kind->blocks && now >= next_flush) {
        cp__channel_submit_writers(ch);
      }
    }
    pthread_mutex_unlock(&g->mutex);
    for (size_t i = 0; i < n_rolls; i++) cp__handle_roll(rolls[i]); /* opens a file: outside the library mutex */
    if (n_rolls == ROLLS_PER_WAKE) next = now;
    if (now >= next_flush) next_flush = now + flush_ticks;
    if (next_flush < next) next = next_flush;

    pthread_mutex_lock(&g->queue_mutex);
    if (g->stopping) break;
    if (!g->timer_wakeup) {
      now = cp_tsc();
      if (next > now) {
        double ns = (double)(next - now) * 1e9 / g->frequency.hz;
        if (ns > wake_ns) ns = wake_ns;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t total = (uint64_t)ts.tv_nsec + (uint64_t)ns;
        ts.tv_sec += (time_t)(total / 1000000000ull);
        ts.tv_nsec = (long)(total % 1000000000ull);
        pthread_cond_timedwait(&g->timer_cond, &g->queue_mutex, &ts);
      }
    }
    g->timer_wakeup = false;
  }
  pthread_mutex_unlock(&g->queue_mutex);
  return NULL;
}

static void read_identity(cp_library *g) {
  if (gethostname(g->host, sizeof g->host) != 0) strcpy(g->host, "unknown");
  g->host[sizeof g->host - 1] = '\0';
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (!f || !fgets(g->boot_id, sizeof g->boot_id, f)) strcpy(g->boot_id, "unknown");
  if (f) fclose(f);
  g->boot_id[strcspn(g->boot_id, "\n")] = '\0';
}

static void at_exit(void) { cp_stop(); }

/* A child of fork() has none of the parent's threads: it starts afresh on first use, and logs to the
 * parent's channels become counted no-ops. */
static void after_fork_child(void) {
  cp_library *g = &cp__lib;
  for (cp_channel *ch = g->channels; ch; ch = ch->next_all) atomic_store(&ch->open, 0);
  g->channels = NULL;
  g->stopping = false;
  g->compress_head = g->compress_tail = g->io_head = g->io_tail = NULL;
  pthread_mutex_init(&g->mutex, NULL);
  pthread_mutex_init(&g->queue_mutex, NULL);
  atomic_store(&g->started, 0);
  cp__inbox_forget();
}

static int start_locked(const cp_options *options, cp_error *error) {
  cp_library *g = &cp__lib;
  cp_options o;
  cp_options_init(&o);
  if (options) o = *options;
  cp_options defaults;
  cp_options_init(&defaults);
  if (!o.block_records) o.block_records = defaults.block_records;
  if (!o.channel_blocks) o.channel_blocks = defaults.channel_blocks;
  if (!o.compression_threads) o.compression_threads = defaults.compression_threads;
  if (o.block_records < 16 || o.block_records > (1u << 24))
    return cp__fail(error, EINVAL, "block_records=%u is out of range: expected 16 to 16777216", o.block_records);
  if (o.channel_blocks < 2 || o.channel_blocks > 65536)
    return cp__fail(error, EINVAL, "channel_blocks=%u is out of range: expected 2 to 65536", o.channel_blocks);
  if (o.compression_threads > 64)
    return cp__fail(error, EINVAL, "compression_threads=%u is out of range: expected 1 to 64", o.compression_threads);
  if (o.compression != CP_COMPRESSION_NONE && o.compression != CP_COMPRESSION_ZSTD)
    return cp__fail(error, EINVAL, "compression=%d is unknown: expected 0 (none) or 1 (zstd)", (int)o.compression);
  if (o.full_policy != CP_FULL_BLOCK && o.full_policy != CP_FULL_DROP)
    return cp__fail(error, EINVAL, "full_policy=%d is unknown: expected 0 (block) or 1 (drop)", (int)o.full_policy);
  if (o.tsc_read != CP_TSC_ORDERED && o.tsc_read != CP_TSC_UNORDERED)
    return cp__fail(error, EINVAL, "tsc_read=%d is unknown: expected 0 (ordered) or 1 (unordered)", (int)o.tsc_read);
  if (o.compression == CP_COMPRESSION_ZSTD && (o.zstd_level < -7 || o.zstd_level > 22))
    return cp__fail(error, EINVAL, "zstd_level=%d is out of range: expected -7 to 22", o.zstd_level);
  int rc = roll_bytes(o.roll_bytes, &o.roll_bytes, error);
  if (rc) return rc;

  char path[4096];
  const char *dir = o.log_dir;
  if (!dir || !*dir) dir = getenv("CLOUDPROFILER_LOG_DIR");
  if (!dir || !*dir) {
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/cloudprofiler-logs", tmp && *tmp ? tmp : "/tmp");
    dir = path;
  }
  if ((rc = make_dirs(dir, error))) return rc;
  if ((rc = cp_tsc_frequency_get(&g->frequency, error))) return rc;
  free(g->log_dir);
  g->log_dir = strdup(dir);
  o.log_dir = g->log_dir;
  g->options = o;
  cp__tsc_unordered = o.tsc_read == CP_TSC_UNORDERED;
  read_identity(g);
  cp__rules_file_poll(); /* before any channel opens by rules (none can be open yet: no switch runs here) */
  g->stopping = false;
  /* The timer waits against CLOCK_MONOTONIC: deadlines stay right when the wall clock steps. */
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_destroy(&g->timer_cond);
  pthread_cond_init(&g->timer_cond, &attr);
  pthread_condattr_destroy(&attr);

  g->compress_threads = calloc(o.compression_threads, sizeof(pthread_t));
  g->n_compress_threads = 0;
  for (uint32_t i = 0; g->compress_threads && i < o.compression_threads; i++)
    if (pthread_create(&g->compress_threads[i], NULL, compress_main, NULL) == 0) g->n_compress_threads++;
  if (!g->n_compress_threads || pthread_create(&g->io_thread, NULL, io_main, NULL) != 0 ||
      pthread_create(&g->timer_thread, NULL, timer_main, NULL) != 0)
    return cp__fail(error, EAGAIN, "cannot start the library's threads");

  static bool hooks;
  if (!hooks) {
    atexit(at_exit);
    pthread_atfork(NULL, NULL, after_fork_child);
    hooks = true;
  }
  fprintf(stderr, "cloudprofiler: logging to %s\n", g->log_dir);
  atomic_store(&g->started, 1);
  return 0;
}

int cp_start(const cp_options *options, cp_error *error) {
  pthread_mutex_lock(&cp__lib.mutex);
  int rc = atomic_load(&cp__lib.started)
               ? cp__fail(error, EALREADY, "the library has already started, logging to %s", cp__lib.log_dir)
               : start_locked(options, error);
  pthread_mutex_unlock(&cp__lib.mutex);
  return rc;
}

int cp__ensure_started(cp_error *error) {
  if (CP_LIKELY(atomic_load(&cp__lib.started))) return 0;
  pthread_mutex_lock(&cp__lib.mutex);
  int rc = atomic_load(&cp__lib.started) ? 0 : start_locked(NULL, error);
  pthread_mutex_unlock(&cp__lib.mutex);
  return rc;
}

const char *cp_log_dir(void) { return atomic_load(&cp__lib.started) ? cp__lib.log_dir : NULL; }

/* Open channels and handles, snapshotted so that flushing does not hold the library mutex. Not segments: their
 * handle flushes and closes them under its mutex, which orders that with its switches (a segment closed between a
 * switch's store and its switch.out would end without it). */
static size_t open_channels(cp_channel ***out) {
  pthread_mutex_lock(&cp__lib.mutex);
  size_t n = 0;
  for (cp_channel *ch = cp__lib.channels; ch; ch = ch->next_all) n += atomic_load(&ch->open) && !ch->is_segment;
  cp_channel **list = calloc(n ? n : 1, sizeof *list);
  size_t i = 0;
  for (cp_channel *ch = cp__lib.channels; list && ch; ch = ch->next_all)
    if (atomic_load(&ch->open) && !ch->is_segment) list[i++] = ch;
  pthread_mutex_unlock(&cp__lib.mutex);
  *out = list;
  return list ? i : 0;
}

int cp_flush_all(cp_error *error) {
  if (!atomic_load(&cp__lib.started)) return 0;
  cp_channel **list;
  size_t n = open_channels(&list);
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    int r = cp_channel_flush(list[i], error);
    if (r && r != EBADF && !rc) rc = r;
  }
  free(list);
  return rc;
}

int cp_stop(void) {
  static pthread_mutex_t stop_mutex = PTHREAD_MUTEX_INITIALIZER;
  cp_library *g = &cp__lib;
  pthread_mutex_lock(&stop_mutex);
  if (!atomic_load(&g->started)) {
    pthread_mutex_unlock(&stop_mutex);
    return 0;
  }
  cp__inbox_stop(); /* its last records go into channels that close below */
  cp_channel **list;
  size_t n = open_channels(&list);
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    cp_error error;
    int r = cp_channel_close(list[i], &error);
    if (r == EBADF) continue; /* closed by its owner meanwhile */
    if (r) fprintf(stderr, "cloudprofiler: closing channel '%s' at stop: %s\n", list[i]->name, error.message);
    if (!rc) rc = r;
  }
  free(list);
  pthread_mutex_lock(&g->queue_mutex);
  g->stopping = true;
  pthread_cond_broadcast(&g->compress_cond);
  pthread_cond_broadcast(&g->io_cond);
  pthread_cond_broadcast(&g->timer_cond);
  pthread_mutex_unlock(&g->queue_mutex);
  for (uint32_t i = 0; i < g->n_compress_threads; i++) pthread_join(g->compress_threads[i], NULL);
  pthread_join(g->io_thread, NULL);
  pthread_join(g->timer_thread, NULL);
  pthread_mutex_lock(&g->mutex);
  free(g->compress_threads);
  g->compress_threads = NULL;
  g->n_compress_threads = 0;
  atomic_store(&g->started, 0);
  pthread_mutex_unlock(&g->mutex);
  pthread_mutex_unlock(&stop_mutex);
  return rc;
}

void cp_library_stats_get(cp_library_stats *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&cp__lib.mutex);
  out->channels_opened = cp__lib.channels_opened;
  for (cp_channel *ch = cp__lib.channels; ch; ch = ch->next_all) {
    if (ch->over_segments) continue; /* its segments are in the list */
    cp_channel_stats s;
    cp_channel_stats_get(ch, &s, NULL);
    out->channels_open += atomic_load(&ch->open) != 0;
    out->dropped += s.dropped;
    out->bytes_written += s.bytes_written;
    out->logged += s.logged;
  }
  pthread_mutex_unlock(&cp__lib.mutex);
  out->null_handle_logs = atomic_load(&cp__lib.null_handle_logs);
  out->sample_scanned = atomic_load(&cp__lib.sample_scanned);
  out->sample_scan_ticks = atomic_load(&cp__lib.sample_scan_ticks);
}

size_t cp_channel_counts(cp_channel_count *out, size_t cap) {
  size_t n = 0;
  pthread_mutex_lock(&cp__lib.mutex);
  for (cp_channel *ch = cp__lib.channels; ch; ch = ch->next_all) {
    if (ch->is_segment) continue; /* its handle counts it */
    if (n < cap) {
      cp_channel_stats s;
      cp_channel_stats_get(ch, &s, NULL);
      out[n] = (cp_channel_count){ch->name, s.logged, s.dropped};
    }
    n++;
  }
  pthread_mutex_unlock(&cp__lib.mutex);
  return n;
}
