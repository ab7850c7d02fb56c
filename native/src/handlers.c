/* The hot path: cp_log dispatches to the channel's handler without locks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *const handler_names[CP_HANDLER_COUNT_] = {
    "null", "identity", "buffered", "spc", "mpc", "downsample", "xoy", "firstlast", "ret_start", "ret_end"};
static const int handler_params[CP_HANDLER_COUNT_] = {0, 0, 0, 1, 1, 1, 2, 0, 2, 3};

const char *cp_handler_name(cp_handler h) {
  return (int)h >= 0 && h < CP_HANDLER_COUNT_ ? handler_names[h] : "unknown";
}

int cp_handler_param_count(cp_handler h) { return (int)h >= 0 && h < CP_HANDLER_COUNT_ ? handler_params[h] : -1; }

int cp_handler_from_name(const char *name, cp_handler *out, cp_error *error) {
  for (int i = 0; name && i < CP_HANDLER_COUNT_; i++)
    if (strcmp(name, handler_names[i]) == 0) return *out = (cp_handler)i, 0;
  return cp__fail(error, EINVAL,
                  "unknown handler '%s': expected one of null, identity, buffered, spc, mpc, downsample, xoy, "
                  "firstlast, ret_start, ret_end",
                  name ? name : "(null)");
}

int cp_handler_check(cp_handler h, const int64_t *params, size_t n_params, cp_error *error) {
  if ((int)h < 0 || h >= CP_HANDLER_COUNT_)
    return cp__fail(error, EINVAL, "handler %d is unknown: expected 0 to %d", (int)h, CP_HANDLER_COUNT_ - 1);
  int want = handler_params[h];
  if ((int)n_params != want || (want && !params))
    return cp__fail(error, EINVAL, "handler %s takes %d parameter(s), got %zu", handler_names[h], want, n_params);
  for (int i = 0; i < want; i++) {
    int rc = cp__handler_check_param(h, (uint32_t)i, params[i], params, error);
    if (rc) return rc;
  }
  return 0;
}

int cp__handler_check_param(cp_handler h, uint32_t index, int64_t value, const int64_t *all, cp_error *error) {
  const char *name = cp_handler_name(h);
  switch (h) {
    case CP_HANDLER_SPC:
    case CP_HANDLER_MPC:
      if (value < 1000 || value > 3600000000000LL)
        return cp__fail(error, EINVAL, "%s period_ns=%lld is out of range: expected 1000 (1 us) to 3600000000000 (1 h)",
                        name, (long long)value);
      return 0;
    case CP_HANDLER_DOWNSAMPLE:
      if (value < 1) return cp__fail(error, EINVAL, "downsample n=%lld is out of range: expected n >= 1", (long long)value);
      return 0;
    case CP_HANDLER_XOY:
      if (index == 1 && value < 1)
        return cp__fail(error, EINVAL, "xoy y=%lld is out of range: expected y >= 1", (long long)value);
      if (all[0] < 0 || all[0] > all[1])
        return cp__fail(error, EINVAL, "xoy x=%lld is out of range: expected 0 <= x <= y (y=%lld)", (long long)all[0],
                        (long long)all[1]);
      return 0;
    case CP_HANDLER_RET_START:
      if (index == 0 && (value < 0 || value > 65535))
        return cp__fail(error, EINVAL, "ret_start port=%lld is out of range: expected 0 (any) to 65535", (long long)value);
      return 0;
    case CP_HANDLER_RET_END:
      if (index == 0 && (value < 1 || value > 0xFFFFFFFFLL))
        return cp__fail(error, EINVAL, "ret_end address=%lld is out of range: expected an IPv4 address as an integer "
                        "from 1 to 4294967295", (long long)value);
      if (index == 1 && (value < 1 || value > 65535))
        return cp__fail(error, EINVAL, "ret_end port=%lld is out of range: expected 1 to 65535", (long long)value);
      return 0;
    default: return 0;
  }
}

/* ---- per-thread writers ---- */

#define TLS_SLOTS 16
static __thread __attribute__((tls_model("initial-exec"))) struct {
  cp_channel *channel;
  cp_writer *writer;
} tls_cache[TLS_SLOTS];
static __thread __attribute__((tls_model("initial-exec"))) cp_writer *tls_writers;
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

/* A thread that ends hands off what its blocks hold. */
static void thread_exit(void *unused) {
  (void)unused;
  for (cp_writer *w = tls_writers; w; w = w->thread_next) {
    pthread_mutex_lock(&w->mutex);
    if (w->block && atomic_load(&w->channel->open)) {
      cp__writer_submit_range(w);
      cp__block_release(w->channel, w->block);
      w->block = NULL;
    }
    pthread_mutex_unlock(&w->mutex);
  }
  tls_writers = NULL;
  memset(tls_cache, 0, sizeof tls_cache);
}

static void make_exit_key(void) { pthread_key_create(&exit_key, thread_exit); }

cp_writer *cp__writer_register(cp_channel *ch) {
  cp_writer *w = tls_writers;
  while (w && w->channel != ch) w = w->thread_next;
  if (!w) {
    w = calloc(1, sizeof *w);
    if (!w) return NULL;
    pthread_mutex_init(&w->mutex, NULL);
    w->channel = ch;
    pthread_once(&exit_key_once, make_exit_key);
    pthread_setspecific(exit_key, (void *)1);
    w->thread_next = tls_writers;
    tls_writers = w;
    pthread_mutex_lock(&ch->mutex);
    w->next = ch->writers;
    ch->writers = w;
    pthread_mutex_unlock(&ch->mutex);
  }
  tls_cache[ch->number % TLS_SLOTS].channel = ch;
  tls_cache[ch->number % TLS_SLOTS].writer = w;
  return w;
}

static inline cp_writer *writer_of(cp_channel *ch) {
  unsigned slot = (unsigned)(ch->number % TLS_SLOTS);
  if (CP_LIKELY(tls_cache[slot].channel == ch)) return tls_cache[slot].writer;
  return cp__writer_register(ch);
}

/* Single-writer counters: the owning thread is the only one that stores. */
static inline void bump(_Atomic uint64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

static inline void writer_append(cp_writer *w, int64_t id, uint64_t tsc) {
  bump(&w->kept);
  uint32_t n = atomic_load_explicit(&w->filled, memory_order_relaxed);
  cp_block *b = w->block;
  if (CP_UNLIKELY(!b || n >= b->capacity)) {
    cp__writer_append_slow(w, id, tsc);
    return;
  }
  b->ids[n] = id;
  b->tscs[n] = tsc;
  atomic_store_explicit(&w->filled, n + 1, memory_order_release);
}

static void identity_log(cp_channel *ch, int64_t id, uint64_t tsc) {
  pthread_mutex_lock(&ch->mutex);
  if (ch->batch0) {
    ch->batch0[ch->batch_len] = id;
    ch->batch1[ch->batch_len] = tsc;
    atomic_fetch_add_explicit(&ch->kept, 1, memory_order_relaxed);
    if (++ch->batch_len == ch->batch_cap) cp__channel_write_batch(ch);
  } else {
    atomic_fetch_add(&ch->after_close, 1);
  }
  pthread_mutex_unlock(&ch->mutex);
}

static inline int64_t floor_mod(int64_t a, int64_t m) {
  int64_t r = a % m;
  return r < 0 ? r + m : r;
}

/* Handlers that keep records: the TSC is read only for a record that is kept. */
static void log_record(cp_channel *ch, int64_t id) {
  if (ch->handler == CP_HANDLER_IDENTITY) {
    identity_log(ch, id, cp__tsc());
    return;
  }
  if (ch->handler == CP_HANDLER_DOWNSAMPLE) {
    uint64_t call = atomic_fetch_add_explicit(&ch->calls, 1, memory_order_relaxed);
    if (call % (uint64_t)atomic_load_explicit(&ch->live_params[0], memory_order_relaxed)) return;
  }
  cp_writer *w = writer_of(ch);
  if (CP_UNLIKELY(!w)) {
    atomic_fetch_add(&ch->dropped, 1);
    return;
  }
  switch (ch->handler) {
    case CP_HANDLER_DOWNSAMPLE: writer_append(w, id, cp__tsc()); return; /* logged counts the calls above */
    case CP_HANDLER_BUFFERED:
    case CP_HANDLER_RET_START:
      bump(&w->logged);
      writer_append(w, id, cp__tsc());
      return;
    case CP_HANDLER_RET_END:
      bump(&w->logged);
      writer_append(w, id, cp__tsc());
      cp__ret_send(ch, id);
      return;
    case CP_HANDLER_XOY: {
      bump(&w->logged);
      int64_t x = atomic_load_explicit(&ch->live_params[0], memory_order_relaxed);
      int64_t y = atomic_load_explicit(&ch->live_params[1], memory_order_relaxed);
      if (floor_mod(id, y) < x) writer_append(w, id, cp__tsc());
      return;
    }
    case CP_HANDLER_FIRSTLAST: {
      bump(&w->logged);
      uint64_t tsc = cp__tsc();
      if (!w->has_first) {
        w->first_id = id;
        w->first_tsc = tsc;
        w->has_first = true;
      }
      w->last_id = id;
      w->last_tsc = tsc;
      return;
    }
    default: return;
  }
}

void cp__log_at(cp_channel *ch, int64_t id, uint64_t tsc) {
  if (CP_UNLIKELY(!atomic_load_explicit(&ch->open, memory_order_relaxed))) {
    atomic_fetch_add_explicit(&ch->after_close, 1, memory_order_relaxed);
    return;
  }
  cp_writer *w = writer_of(ch);
  if (CP_UNLIKELY(!w)) {
    atomic_fetch_add(&ch->dropped, 1);
    return;
  }
  bump(&w->logged);
  writer_append(w, id, tsc);
}

/* The counting handlers are dispatched first: a few instructions each, no TSC read, no stack frame. */
static inline void log_one(cp_channel *ch, int64_t id) {
  switch (ch->handler) {
    case CP_HANDLER_SPC: bump(&ch->calls); return;
    case CP_HANDLER_MPC: atomic_fetch_add_explicit(&ch->calls, 1, memory_order_relaxed); return;
    case CP_HANDLER_NULL: {
      cp_writer *w = writer_of(ch); /* a per-thread count: threads do not contend */
      if (CP_LIKELY(w)) bump(&w->logged);
      else atomic_fetch_add(&ch->dropped, 1);
      return;
    }
    default: log_record(ch, id);
  }
}

void cp_log(cp_channel *ch, int64_t tuple_id) {
  if (CP_UNLIKELY(!ch)) {
    atomic_fetch_add_explicit(&cp__lib.null_handle_logs, 1, memory_order_relaxed);
    return;
  }
  if (CP_UNLIKELY(!atomic_load_explicit(&ch->open, memory_order_relaxed))) {
    atomic_fetch_add_explicit(&ch->after_close, 1, memory_order_relaxed);
    return;
  }
  log_one(ch, tuple_id);
}

void cp_log_many(cp_channel *ch, const int64_t *ids, size_t n) {
  if (CP_UNLIKELY(!ch)) {
    atomic_fetch_add_explicit(&cp__lib.null_handle_logs, n, memory_order_relaxed);
    return;
  }
  if (CP_UNLIKELY(!atomic_load_explicit(&ch->open, memory_order_relaxed))) {
    atomic_fetch_add_explicit(&ch->after_close, n, memory_order_relaxed);
    return;
  }
  if (ch->handler == CP_HANDLER_BUFFERED) {
    cp_writer *w = writer_of(ch);
    if (CP_UNLIKELY(!w)) {
      atomic_fetch_add(&ch->dropped, n);
      return;
    }
    atomic_store_explicit(&w->logged, atomic_load_explicit(&w->logged, memory_order_relaxed) + n,
                          memory_order_relaxed);
    for (size_t i = 0; i < n; i++) writer_append(w, ids[i], cp__tsc());
    return;
  }
  for (size_t i = 0; i < n; i++) log_one(ch, ids[i]);
}
