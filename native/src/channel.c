/* A channel's life after its handler's check: its file and metadata, flush, close and counts. Handler-specific
 * steps come through the hooks of the channel's descriptor (handlers.c). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "writers.h"

static bool valid(const cp_channel *ch) { return ch && ch->magic == CP_CHANNEL_MAGIC; }

static void safe_name(char *out, size_t cap, const char *in) {
  size_t i = 0;
  for (; in[i] && i + 1 < cap && i < 100; i++) {
    char c = in[i];
    bool keep =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    out[i] = keep ? c : '_';
  }
  out[i] = '\0';
  if (!i || out[0] == '.') out[0] = '_', out[i ? i : 1] = '\0';
}

void cp__clock_json(char *out, size_t cap, const cp_clock_reading *r) {
  snprintf(out, cap,
           "{\"tsc\": %" PRIu64 ", \"monotonic_raw_ns\": %" PRId64 ", \"realtime_ns\": %" PRId64
           ", \"uncertainty_ticks\": %" PRIu64 "}",
           r->tsc, r->monotonic_raw_ns, r->realtime_ns, r->uncertainty_ticks);
}

/* Values that change are padded to a fixed width in the schema message at the file's start, so that it keeps its
 * length and can be rewritten in place; the footer, written once at close, takes them as they are. */
static void padded(char *out, size_t width, const char *value, bool pad) {
  size_t n = strnlen(value, width);
  memcpy(out, value, n);
  if (pad) memset(out + n, ' ', width - n);
  out[pad ? width : n] = '\0';
}

static void u64_padded(char *out, uint64_t v, bool pad) {
  char tmp[24];
  snprintf(tmp, sizeof tmp, "%" PRIu64, v);
  padded(out, 20, tmp, pad);
}

enum { FIXED_KEYS = 23, MAX_KEYS = FIXED_KEYS + CP_META_MAX + CP_SEGMENT_KEYS };

/* A channel's metadata pairs and the text of its values. */
typedef struct metadata {
  const char *keys[MAX_KEYS], *values[MAX_KEYS];
  size_t n;
  char number[24], pid[24], hz[40], hz_unc[40], params[64], params_padded[64], open_clock[160], close_clock[200],
      logged[24], written[24], dropped[24], rejected[24], rejected_files[24], closed[8], switch_clocks[2][200];
} metadata;

/* A clock reading that may come later ("null" until then), padded to the width of the longest one (four 20-digit
 * numbers: 151 bytes). */
static void clock_padded(char *out, const cp_clock_reading *r, bool has, bool pad) {
  char raw[192] = "null";
  if (has) cp__clock_json(raw, sizeof raw, r);
  padded(out, 160, raw, pad);
}

/* Takes ch->mutex for the counts: never call it with that mutex held. */
static void channel_metadata(cp_channel *ch, bool pad, metadata *m) {
  cp_library *g = &cp__lib;
  cp_channel_stats s;
  cp_channel_stats_get(ch, &s, NULL);
  snprintf(m->number, sizeof m->number, "%" PRIu64, ch->number);
  snprintf(m->pid, sizeof m->pid, "%ld", (long)getpid());
  snprintf(m->hz, sizeof m->hz, "%.3f", g->frequency.hz);
  snprintf(m->hz_unc, sizeof m->hz_unc, "%.3f", g->frequency.uncertainty_hz);
  size_t used = (size_t)snprintf(m->params, sizeof m->params, "[");
  for (int i = 0; i < ch->kind->n_params; i++)
    if (!ch->kind->params[i].secret)
      used += (size_t)snprintf(m->params + used, sizeof m->params - used, "%s%" PRId64, used > 1 ? ", " : "",
                               atomic_load(&ch->live_params[i]));
  snprintf(m->params + used, sizeof m->params - used, "]");
  padded(m->params_padded, 48, m->params, pad);
  cp__clock_json(m->open_clock, sizeof m->open_clock, &ch->open_clock);
  clock_padded(m->close_clock, &ch->close_clock, ch->has_close_clock, pad);
  for (int i = 0; i < 2; i++) clock_padded(m->switch_clocks[i], &ch->switch_clocks[i], ch->has_switch_clock[i], pad);
  u64_padded(m->logged, s.logged, pad);
  u64_padded(m->written, s.written, pad);
  u64_padded(m->dropped, s.dropped, pad);
  u64_padded(m->rejected, atomic_load(&ch->rejected_blocks), pad);
  u64_padded(m->rejected_files, atomic_load(&ch->rejected_files), pad);
  padded(m->closed, 5, atomic_load(&ch->open) ? "false" : "true", pad);

  m->n = 0;
#define KV(k, v) (m->keys[m->n] = (k), m->values[m->n] = (v), m->n++)
  KV("cloudprofiler.version", cp_version_string());
  KV("channel.name", ch->name);
  KV("channel.number", m->number);
  KV("handler", ch->kind->name);
  KV("handler.params", m->params_padded);
  KV("host", g->host);
  KV("pid", m->pid);
  KV("boot_id", g->boot_id);
  KV("tsc.invariant", cp_tsc_is_invariant() ? "true" : "false");
  KV("tsc.hz", m->hz);
  KV("tsc.hz_uncertainty", m->hz_unc);
  KV("tsc.hz_source", g->frequency.source == CP_FREQUENCY_CPUID ? "cpuid-0x15" : "calibrated");
  KV("tsc.simulation", cp_tsc_simulation());
  KV("tsc.read", g->options.tsc_read == CP_TSC_UNORDERED ? "unordered" : "ordered");
  KV("compression", g->options.compression == CP_COMPRESSION_ZSTD ? "zstd" : "none");
  KV("open.clock", m->open_clock);
  KV("close.clock", m->close_clock);
  KV("records.logged", m->logged);
  KV("records.written", m->written);
  KV("records.dropped", m->dropped);
  KV("handoff.rejected_blocks", m->rejected);
  KV("handoff.rejected_files", m->rejected_files);
  KV("closed", m->closed);
  if (ch->is_segment) KV("switch.in", m->switch_clocks[0]), KV("switch.out", m->switch_clocks[1]);
#undef KV
  for (size_t i = 0; i < ch->n_meta && m->n < MAX_KEYS; i++, m->n++) {
    m->keys[m->n] = ch->meta_keys[i];
    m->values[m->n] = ch->meta_values[i];
  }
}

void cp__channel_set_switch_clock(cp_channel *ch, int which) {
  cp_clock_reading clock;
  bool have = cp_clock_read(&clock, NULL) == 0;
  pthread_mutex_lock(&ch->file_mutex); /* the IO thread encodes the header under this mutex */
  ch->switch_clocks[which] = clock;
  ch->has_switch_clock[which] = have;
  pthread_mutex_unlock(&ch->file_mutex);
}

static int encode_header(cp_channel *ch, cp_buf *out) {
  metadata m;
  channel_metadata(ch, true, &m);
  return cp__ipc_schema(out, ch->kind->record_kind, m.keys, m.values, m.n);
}

/* Appends bytes at the end of the file; a failure is reported once and stops the channel's writes. */
static int write_bytes(cp_channel *ch, const uint8_t *data, size_t len) {
  if (ch->fd < 0 || ch->io_error) return EBADF;
  size_t done = 0;
  while (done < len) {
    ssize_t w = write(ch->fd, data + done, len - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      ch->io_error = errno ? errno : EIO;
      fprintf(stderr, "cloudprofiler: writing %s failed: %s; further records of this channel are counted as dropped\n",
              ch->path, strerror(ch->io_error));
      return ch->io_error;
    }
    done += (size_t)w;
  }
  uint64_t before = atomic_fetch_add(&ch->bytes_written, len), roll = (uint64_t)cp__lib.options.roll_bytes;
  if (roll && before < roll && before + len >= roll) cp__timer_kick(); /* which rolls the channel's handle */
  return 0;
}

int cp__channel_write_message(cp_channel *ch, const uint8_t *msg, size_t len) {
  if (ch->n_footer_blocks == ch->footer_blocks_cap && !ch->footer_lost) {
    size_t cap = ch->footer_blocks_cap ? 2 * ch->footer_blocks_cap : 64;
    cp_ipc_block *grown = realloc(ch->footer_blocks, cap * sizeof *grown);
    if (grown) ch->footer_blocks = grown, ch->footer_blocks_cap = cap;
    else ch->footer_lost = true; /* the records still go to the file, read as a stream (a cut file) */
  }
  uint32_t meta_len;
  memcpy(&meta_len, msg + 4, 4);
  cp_ipc_block block = {.offset = (int64_t)atomic_load(&ch->bytes_written),
                        .meta_len = (int32_t)(8 + meta_len),
                        .body_len = (int64_t)(len - 8 - meta_len)};
  int rc = write_bytes(ch, msg, len);
  if (rc == 0 && !ch->footer_lost) ch->footer_blocks[ch->n_footer_blocks++] = block;
  return rc;
}

void cp__channel_write_header(cp_channel *ch) {
  pthread_mutex_lock(&ch->file_mutex);
  cp_buf b = {0};
  if (ch->fd >= 0 && !ch->io_error && encode_header(ch, &b) == 0 && b.len == ch->header_len) {
    if (pwrite(ch->fd, b.data, b.len, sizeof cp__ipc_magic) != (ssize_t)b.len) ch->io_error = errno ? errno : EIO;
  }
  cp__buf_free(&b);
  pthread_mutex_unlock(&ch->file_mutex);
}

void cp__channel_write_rows(cp_channel *ch, const int64_t *col0, const uint64_t *col1, uint32_t rows) {
  cp__channel_sample_rows(ch, col0, col1, rows); /* identity and firstlast records (counters' periods: none) */
  cp_buf msg = {0};
  if (cp__ipc_batch(&msg, col0, col1, rows, cp__lib.options.compression, cp__lib.options.zstd_level) == 0 &&
      cp__channel_write_message(ch, msg.data, msg.len) == 0)
    atomic_fetch_add(&ch->written, rows);
  else atomic_fetch_add(&ch->dropped, rows); /* encoding or disk failure: counted, never silent */
  cp__buf_free(&msg);
}

void cp__channel_write_batch(cp_channel *ch) {
  if (!ch->batch_len) return;
  uint32_t rows = ch->batch_len;
  ch->batch_len = 0;
  cp__channel_write_rows(ch, ch->batch0, ch->batch1, rows);
}

static void wait_written(cp_channel *ch) {
  pthread_mutex_lock(&ch->mutex);
  uint64_t target = ch->next_seq;
  while (ch->written_seq < target) pthread_cond_wait(&ch->written_cond, &ch->mutex);
  pthread_mutex_unlock(&ch->mutex);
}

static int open_file(cp_channel *ch, cp_error *error) {
  char safe[128], host[128];
  safe_name(safe, sizeof safe, ch->name);
  safe_name(host, sizeof host, cp__lib.host);
  size_t len = strlen(cp__lib.log_dir) + strlen(safe) + strlen(host) + 64;
  ch->path = malloc(len);
  if (!ch->path) return cp__fail(error, ENOMEM, "out of memory");
  snprintf(ch->path, len, "%s/%s.%s.%ld.%" PRIu64 ".arrows", cp__lib.log_dir, safe, host, (long)getpid(), ch->number);
  /* 0600, created exclusively, never through a link: a name taken already (a link planted there, the file of an
   * earlier process with this pid) is removed, not followed, and created again */
  int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  ch->fd = open(ch->path, flags, 0600);
  if (ch->fd < 0 && errno == EEXIST && unlink(ch->path) == 0) ch->fd = open(ch->path, flags, 0600);
  if (ch->fd < 0) {
    int code = errno;
    return cp__fail(error, code, "cannot create log file %s: %s", ch->path, strerror(code));
  }
  cp_buf b = {0};
  int rc = encode_header(ch, &b);
  if (!rc) {
    ch->header_len = b.len;
    rc = write_bytes(ch, cp__ipc_magic, sizeof cp__ipc_magic);
    if (!rc) rc = write_bytes(ch, b.data, b.len);
  }
  cp__buf_free(&b);
  if (rc) return cp__fail(error, rc, "cannot write the schema to %s: %s", ch->path, strerror(rc));
  return 0;
}

/* A channel that failed to open: nothing of it stays behind, neither its file nor its descriptor nor its memory
 * (no handle to it was ever given out). */
static void discard(cp_channel *ch) {
  if (ch->fd >= 0) {
    close(ch->fd);
    unlink(ch->path);
  }
  for (size_t i = 0; ch->meta_keys && ch->meta_values && i < ch->n_meta; i++) {
    free(ch->meta_keys[i]);
    free(ch->meta_values[i]);
  }
  free(ch->meta_keys);
  free(ch->meta_values);
  free(ch->name);
  free(ch->path);
  free(ch->all_blocks);
  free(ch->batch0);
  free(ch->batch1);
  pthread_mutex_destroy(&ch->mutex);
  pthread_mutex_destroy(&ch->pool_mutex);
  pthread_mutex_destroy(&ch->file_mutex);
  pthread_mutex_destroy(&ch->samples_mutex);
  free(ch->samples);
  pthread_cond_destroy(&ch->pool_cond);
  pthread_cond_destroy(&ch->written_cond);
  free(ch);
}

void cp__channel_list_add(cp_channel *ch) {
  pthread_mutex_lock(&cp__lib.mutex);
  ch->next_all = cp__lib.channels;
  cp__lib.channels = ch;
  pthread_mutex_unlock(&cp__lib.mutex);
}

cp_channel *cp__channel_create(const char *name, const cp_handler_kind *kind, const int64_t *params,
                               const char *const *meta_keys, const char *const *meta_values, size_t n_meta,
                               bool segment, cp_error *error) {
  cp_channel *ch = calloc(1, sizeof *ch);
  if (!ch) return cp__fail(error, ENOMEM, "out of memory"), NULL;
  ch->magic = CP_CHANNEL_MAGIC;
  ch->is_segment = segment;
  atomic_store(&ch->current, ch);
  ch->handler = kind->handler;
  ch->kind = kind;
  ch->fd = -1;
  for (int i = 0; i < kind->n_params; i++) ch->params[i] = params[i], atomic_store(&ch->live_params[i], params[i]);
  ch->name = strdup(name);
  ch->n_meta = n_meta;
  ch->meta_keys = calloc(n_meta + 1, sizeof(char *));
  ch->meta_values = calloc(n_meta + 1, sizeof(char *));
  bool meta_copied = ch->meta_keys && ch->meta_values;
  for (size_t i = 0; meta_copied && i < n_meta; i++) {
    ch->meta_keys[i] = strdup(meta_keys[i]);
    ch->meta_values[i] = strdup(meta_values[i]);
    meta_copied = ch->meta_keys[i] && ch->meta_values[i];
  }
  ch->all_blocks = calloc(cp__lib.options.channel_blocks, sizeof(cp_block *));
  pthread_mutex_init(&ch->mutex, NULL);
  pthread_mutex_init(&ch->pool_mutex, NULL);
  pthread_mutex_init(&ch->file_mutex, NULL);
  pthread_mutex_init(&ch->samples_mutex, NULL);
  pthread_cond_init(&ch->pool_cond, NULL);
  pthread_cond_init(&ch->written_cond, NULL);
  if ((ch->batch_cap = kind->batch)) {
    ch->batch0 = malloc(ch->batch_cap * sizeof(int64_t));
    ch->batch1 = malloc(ch->batch_cap * sizeof(uint64_t));
  }
  if (!ch->name || !meta_copied || !ch->all_blocks || (ch->batch_cap && (!ch->batch0 || !ch->batch1))) {
    discard(ch);
    return cp__fail(error, ENOMEM, "out of memory"), NULL;
  }
  cp_clock_read(&ch->open_clock, NULL);
  pthread_mutex_lock(&cp__lib.mutex);
  ch->number = cp__lib.channels_opened++;
  pthread_mutex_unlock(&cp__lib.mutex);
  atomic_store(&ch->open, 1);
  if (open_file(ch, error) || (kind->open && kind->open(ch, error))) {
    discard(ch);
    return NULL;
  }
  cp__channel_list_add(ch);
  if (kind->sample) cp__timer_kick();
  return ch;
}

int cp__channel_check_open(const cp_channel *ch, const char *what, cp_error *error) {
  if (!valid(ch)) return cp__fail(error, EBADF, "%s: not a channel handle", what);
  if (!atomic_load(&ch->open)) return cp__fail(error, EBADF, "%s: channel '%s' is closed", what, ch->name);
  return 0;
}

static int io_failure(const cp_channel *ch, int code, cp_error *error) {
  return cp__fail(error, code, "writing %s failed: %s", ch->path, strerror(code));
}

/* A handle over segments: flush or close each segment still open, newest first, under the handle's mutex (which
 * a switch holds); the first error other than a segment closed meanwhile (by cp_stop or the timer thread). */
static int each_segment(cp_channel *handle, int (*op)(cp_channel *, cp_error *), cp_error *error) {
  int rc = 0;
  pthread_mutex_lock(&handle->mutex);
  for (cp_channel *s = atomic_load(&handle->current); s; s = s->previous_segment) {
    if (!atomic_load(&s->open)) continue;
    cp_error e;
    int r = op(s, &e);
    if (r && r != EBADF && !rc) rc = cp__fail(error, r, "%s", e.message);
  }
  pthread_mutex_unlock(&handle->mutex);
  return rc;
}

int cp_channel_flush(cp_channel *ch, cp_error *error) {
  int rc = cp__channel_check_open(ch, "cp_channel_flush", error);
  if (rc) return rc;
  if (ch->over_segments) return each_segment(ch, cp_channel_flush, error);
  if (ch->kind->blocks) {
    cp__channel_submit_writers(ch);
    wait_written(ch);
  } else if (ch->batch_cap) {
    pthread_mutex_lock(&ch->mutex);
    cp__channel_write_batch(ch);
    pthread_mutex_unlock(&ch->mutex);
  }
  cp__channel_write_header(ch);
  return ch->io_error ? io_failure(ch, ch->io_error, error) : 0;
}

/* The last bytes of a closed file: the end-of-stream marker, then the footer with the final metadata as it is
 * (no padding), which makes it an Arrow IPC file; without the list of batches only the marker. */
static void write_file_end(cp_channel *ch) {
  metadata m;
  channel_metadata(ch, false, &m);
  cp_buf b = {0};
  pthread_mutex_lock(&ch->mutex);
  if (ch->fd >= 0 && !ch->io_error) {
    if (!ch->footer_lost &&
        cp__ipc_file_end(&b, ch->kind->record_kind, m.keys, m.values, m.n, ch->footer_blocks, ch->n_footer_blocks) == 0)
      write_bytes(ch, b.data, b.len);
    else write_bytes(ch, cp__ipc_eos, sizeof cp__ipc_eos);
  }
  free(ch->footer_blocks);
  ch->footer_blocks = NULL;
  ch->n_footer_blocks = ch->footer_blocks_cap = 0;
  free(ch->batch0);
  free(ch->batch1);
  ch->batch0 = NULL;
  ch->batch1 = NULL;
  ch->batch_cap = 0;
  pthread_mutex_unlock(&ch->mutex);
  cp__buf_free(&b);
}

int cp_channel_close(cp_channel *ch, cp_error *error) {
  if (!valid(ch)) return cp__fail(error, EBADF, "cp_channel_close: not a channel handle");
  if (!atomic_exchange(&ch->open, 0))
    return cp__fail(error, EBADF, "cp_channel_close: channel '%s' is already closed", ch->name);
  if (ch->over_segments) return each_segment(ch, cp_channel_close, error);
  atomic_store(&ch->handler, CP__HANDLER_CLOSED);
  cp_clock_reading close_clock;
  bool have_clock = cp_clock_read(&close_clock, NULL) == 0;
  pthread_mutex_lock(&ch->file_mutex); /* the IO thread encodes the header under this mutex */
  ch->close_clock = close_clock;
  ch->has_close_clock = have_clock;
  pthread_mutex_unlock(&ch->file_mutex);
  if (ch->kind->close) ch->kind->close(ch);
  pthread_mutex_lock(&ch->pool_mutex);
  pthread_cond_broadcast(&ch->pool_cond); /* writers waiting for a block give up */
  pthread_mutex_unlock(&ch->pool_mutex);

  if (ch->kind->blocks) {
    for (cp_writer *w = cp__writers_head(ch); w; w = w->next) {
      pthread_mutex_lock(&w->mutex);
      cp__writer_hand_off(w);
      pthread_mutex_unlock(&w->mutex);
    }
    wait_written(ch);
  }
  pthread_mutex_lock(&ch->mutex);
  cp__channel_write_batch(ch);
  pthread_mutex_unlock(&ch->mutex);
  cp__channel_write_header(ch);
  write_file_end(ch);
  pthread_mutex_lock(&ch->file_mutex);
  int rc = 0;
  if (ch->fd >= 0 && close(ch->fd) != 0) rc = errno;
  ch->fd = -1;
  pthread_mutex_unlock(&ch->file_mutex);
  atomic_store(&ch->closed_tsc, cp_tsc());
  return ch->io_error || rc ? io_failure(ch, ch->io_error ? ch->io_error : rc, error) : 0;
}

void cp__closed_calls(cp_channel *ch, uint64_t n) {
  cp_channel *handle = ch->handle;
  cp_channel *current = handle && atomic_load(&handle->open) ? atomic_load(&handle->current) : NULL;
  if (current && current != ch) atomic_fetch_add(&current->late, n);
  else atomic_fetch_add(&ch->after_close, n);
}

int cp_channel_stats_get(const cp_channel *ch_const, cp_channel_stats *out, cp_error *error) {
  if (!valid(ch_const) || !out) return cp__fail(error, EBADF, "cp_channel_stats_get: not a channel handle");
  cp_channel *ch = (cp_channel *)ch_const;
  memset(out, 0, sizeof *out);
  if (ch->over_segments) {
    for (cp_channel *seg = atomic_load(&ch->current); seg; seg = seg->previous_segment) {
      cp_channel_stats s;
      cp_channel_stats_get(seg, &s, NULL);
      out->logged += s.logged, out->kept += s.kept, out->written += s.written, out->dropped += s.dropped;
      out->after_close += s.after_close, out->bytes_written += s.bytes_written;
    }
    out->after_close += atomic_load(&ch->after_close);
    return 0;
  }
  uint64_t in_place = atomic_load(&ch->in_place), w_logged = in_place, w_dropped = 0, w_kept = in_place;
  for (cp_writer *w = cp__writers_head(ch); w; w = w->next) {
    w_logged += atomic_load_explicit(&w->logged, memory_order_relaxed);
    w_dropped += atomic_load_explicit(&w->dropped, memory_order_relaxed);
    w_kept += atomic_load_explicit(&w->kept, memory_order_relaxed);
  }
  out->kept = atomic_load(&ch->kept) + w_kept;
  switch (ch->kind->logged) {
    case CP_LOGGED_CALLS: out->logged = atomic_load(&ch->calls); break;
    case CP_LOGGED_KEPT: out->logged = atomic_load(&ch->kept); break;
    case CP_LOGGED_WRITERS: out->logged = w_logged; break;
  }
  uint64_t late = atomic_load(&ch->late);
  out->logged += late;
  out->written = atomic_load(&ch->written);
  out->dropped = atomic_load(&ch->dropped) + w_dropped + late;
  out->after_close = atomic_load(&ch->after_close);
  out->bytes_written = atomic_load(&ch->bytes_written);
  return 0;
}

cp_handler cp_channel_handler(const cp_channel *ch) {
  return valid(ch) ? atomic_load(&ch->current)->kind->handler : CP_HANDLER_NULL;
}

const char *cp_channel_path(const cp_channel *ch) { return valid(ch) ? atomic_load(&ch->current)->path : NULL; }
