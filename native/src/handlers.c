/* The handler table: each handler's one descriptor (its parameters and their ranges, its file columns, how it
 * writes, its hooks into the channel's life), the public functions that read it, cp_channel_open, and the hot
 * path: cp_log dispatches to the channel's handler without locks. A new handler is its value of cp_handler (the
 * public header), a row of the table, its case in log_one or log_record, and its hooks. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "writers.h"

static void firstlast_close(cp_channel *ch);

/* A handler a row (clang-format would give every field a line of its own). */
/* clang-format off */
#define PERIOD_NS {"period_ns", 1000, 3600000000000LL, "1000 (1 us) to 3600000000000 (1 h)"}
#define SHARED_KEY {"key", INT64_MIN, INT64_MAX, "a 64-bit integer", .secret = true}
#define COUNTER_HOOKS .open = cp__counter_open, .parameterized = cp__counter_parameterized, \
                      .sample = cp__counter_sample, .close = cp__counter_close

static const cp_handler_kind kinds[CP_HANDLER_COUNT_] = {
    [CP_HANDLER_NULL] = {CP_HANDLER_NULL, "null"},
    [CP_HANDLER_IDENTITY] = {CP_HANDLER_IDENTITY, "identity", .batch = 1024, .logged = CP_LOGGED_KEPT},
    [CP_HANDLER_BUFFERED] = {CP_HANDLER_BUFFERED, "buffered", .blocks = true},
    [CP_HANDLER_SPC] = {CP_HANDLER_SPC, "spc", 1, {PERIOD_NS}, .record_kind = 1, .batch = 1024,
                        .logged = CP_LOGGED_CALLS, COUNTER_HOOKS},
    [CP_HANDLER_MPC] = {CP_HANDLER_MPC, "mpc", 1, {PERIOD_NS}, .record_kind = 1, .batch = 1024,
                        .logged = CP_LOGGED_CALLS, COUNTER_HOOKS},
    [CP_HANDLER_DOWNSAMPLE] = {CP_HANDLER_DOWNSAMPLE, "downsample", 1, {{"n", 1, INT64_MAX, "n >= 1"}},
                               .blocks = true, .logged = CP_LOGGED_CALLS},
    [CP_HANDLER_XOY] = {CP_HANDLER_XOY, "xoy", 2,
                        {{"x", 0, INT64_MAX, "0 <= x <= y", .at_most_next = true}, {"y", 1, INT64_MAX, "y >= 1"}},
                        .blocks = true},
    [CP_HANDLER_FIRSTLAST] = {CP_HANDLER_FIRSTLAST, "firstlast", .close = firstlast_close},
    [CP_HANDLER_RET_START] = {CP_HANDLER_RET_START, "ret_start", 2,
                              {{"port", 0, 65535, "0 (any) to 65535"}, SHARED_KEY},
                              .blocks = true, .open = cp__ret_open, .close = cp__ret_start_close,
                              .companion = &kinds[CP_HANDLER_BUFFERED]},
    [CP_HANDLER_RET_END] = {CP_HANDLER_RET_END, "ret_end", 3,
                            {{"address", 1, 0xFFFFFFFFLL, "an IPv4 address as an integer from 1 to 4294967295"},
                             {"port", 1, 65535, "1 to 65535"},
                             SHARED_KEY},
                            .blocks = true, .open = cp__ret_open, .release = cp__ret_end_release},
};
/* clang-format on */

static bool known(cp_handler h) { return (int)h >= 0 && h < CP_HANDLER_COUNT_; }

const cp_handler_kind *cp__handler_kind(cp_handler h) { return known(h) ? &kinds[h] : NULL; }

const char *cp_handler_name(cp_handler h) { return known(h) ? kinds[h].name : "unknown"; }

int cp_handler_param_count(cp_handler h) { return known(h) ? kinds[h].n_params : -1; }

int cp_handler_from_name(const char *name, cp_handler *out, cp_error *error) {
  char names[256] = "";
  for (int i = 0; i < CP_HANDLER_COUNT_; i++) {
    if (name && strcmp(name, kinds[i].name) == 0) return *out = (cp_handler)i, 0;
    size_t used = strlen(names);
    snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", kinds[i].name);
  }
  return cp__fail(error, EINVAL, "unknown handler '%s': expected one of %s", name ? name : "(null)", names);
}

static int param_error(const cp_handler_kind *k, uint32_t i, const int64_t *all, cp_error *error) {
  const cp_param_spec *p = &k->params[i];
  if (p->at_most_next)
    return cp__fail(error, EINVAL, "%s %s=%lld is out of range: expected %s (%s=%lld)", k->name, p->name,
                    (long long)all[i], p->expected, k->params[i + 1].name, (long long)all[i + 1]);
  return cp__fail(error, EINVAL, "%s %s=%lld is out of range: expected %s", k->name, p->name, (long long)all[i],
                  p->expected);
}

/* Parameter i of `all` in its range, and in the order its neighbours ask for. */
static int check_param(const cp_handler_kind *k, uint32_t i, const int64_t *all, cp_error *error) {
  const cp_param_spec *p = &k->params[i];
  if (all[i] < p->min || all[i] > p->max || (p->at_most_next && all[i] > all[i + 1]))
    return param_error(k, i, all, error);
  if (i > 0 && k->params[i - 1].at_most_next && all[i - 1] > all[i]) return param_error(k, i - 1, all, error);
  return 0;
}

int cp_handler_check(cp_handler h, const int64_t *params, size_t n_params, cp_error *error) {
  if (!known(h))
    return cp__fail(error, EINVAL, "handler %d is unknown: expected 0 to %d", (int)h, CP_HANDLER_COUNT_ - 1);
  const cp_handler_kind *k = &kinds[h];
  if (n_params != (size_t)k->n_params || (n_params && !params))
    return cp__fail(error, EINVAL, "handler %s takes %d parameter(s), got %zu", k->name, k->n_params, n_params);
  for (uint32_t i = 0; i < n_params; i++) {
    int rc = check_param(k, i, params, error);
    if (rc) return rc;
  }
  return 0;
}

int cp__channel_args_check(const char *name, const char *const *meta_keys, const char *const *meta_values,
                           size_t n_meta, size_t max_meta, cp_error *error) {
  if (!name) return cp__fail(error, EINVAL, "channel name is NULL");
  if (n_meta > max_meta) return cp__fail(error, EINVAL, "%zu metadata pairs given: at most %zu", n_meta, max_meta);
  for (size_t i = 0; i < n_meta; i++)
    if (!meta_keys[i] || !meta_values[i]) return cp__fail(error, EINVAL, "metadata pair %zu is NULL", i);
  return 0;
}

cp_channel *cp_channel_open(const char *name, cp_handler handler, const int64_t *params, size_t n_params,
                            const char *const *meta_keys, const char *const *meta_values, size_t n_meta,
                            cp_error *error) {
  if (cp__channel_args_check(name, meta_keys, meta_values, n_meta, CP_META_MAX, error) ||
      cp_handler_check(handler, params, n_params, error) || cp__ensure_started(error))
    return NULL;
  if (handler == CP_HANDLER_RET_START || handler == CP_HANDLER_RET_END) /* a socket of their own: they never roll */
    return cp__channel_create(name, &kinds[handler], params, meta_keys, meta_values, n_meta, false, error);
  return cp__handle_open(name, &kinds[handler], params, NULL, meta_keys, meta_values, n_meta, error);
}

int cp_channel_parameterize(cp_channel *ch, uint32_t index, int64_t value, cp_error *error) {
  int rc = cp__channel_check_open(ch, "cp_channel_parameterize", error);
  if (rc) return rc;
  if (ch->over_segments) ch = atomic_load(&ch->current); /* until the next switch */
  const cp_handler_kind *k = ch->kind;
  if (index >= (uint32_t)k->n_params)
    return cp__fail(error, EINVAL, "handler %s has %d parameter(s): index %u is out of range", k->name, k->n_params,
                    index);
  int64_t all[3] = {atomic_load(&ch->live_params[0]), atomic_load(&ch->live_params[1]),
                    atomic_load(&ch->live_params[2])};
  all[index] = value;
  if ((rc = check_param(k, index, all, error))) return rc;
  atomic_store(&ch->live_params[index], value);
  if (k->parameterized) k->parameterized(ch, index);
  return 0;
}

/* firstlast keeps each thread's first and last record in its writer; the close writes the earliest and the
 * latest of them. */
static void firstlast_close(cp_channel *ch) {
  int64_t ids[2];
  uint64_t tscs[2];
  bool have = false;
  for (cp_writer *w = cp__writers_head(ch); w; w = w->next) {
    pthread_mutex_lock(&w->mutex);
    if (w->has_first) {
      if (!have || w->first_tsc < tscs[0]) ids[0] = w->first_id, tscs[0] = w->first_tsc;
      if (!have || w->last_tsc > tscs[1]) ids[1] = w->last_id, tscs[1] = w->last_tsc;
      have = true;
    }
    pthread_mutex_unlock(&w->mutex);
  }
  if (!have) return;
  uint32_t rows = tscs[0] == tscs[1] && ids[0] == ids[1] ? 1 : 2;
  atomic_fetch_add(&ch->kept, rows);
  pthread_mutex_lock(&ch->mutex);
  cp__channel_write_rows(ch, ids, tscs, rows);
  pthread_mutex_unlock(&ch->mutex);
}

/* ---- the hot path ---- */

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

/* Handlers that keep records: the TSC is read only for a record that is kept (`given`: the caller read it, see
 * cp_log_at). Inlined into both callers, so the hot path tests no flag. */
#define RECORD_TSC (given ? given_tsc : cp__tsc())
static inline __attribute__((always_inline)) void log_record_tsc(cp_channel *ch, cp_handler handler, int64_t id,
                                                                 bool given, uint64_t given_tsc) {
  if (handler == CP_HANDLER_IDENTITY) {
    identity_log(ch, id, RECORD_TSC);
    return;
  }
  if (handler == CP_HANDLER_DOWNSAMPLE) {
    uint64_t call = atomic_fetch_add_explicit(&ch->calls, 1, memory_order_relaxed);
    if (call % (uint64_t)atomic_load_explicit(&ch->live_params[0], memory_order_relaxed)) return;
  }
  cp_writer *w = cp__writer_of(ch);
  if (CP_UNLIKELY(!w)) {
    atomic_fetch_add(&ch->dropped, 1);
    return;
  }
  switch (handler) {
    case CP_HANDLER_DOWNSAMPLE: cp__writer_append(w, id, RECORD_TSC); return; /* logged counts the calls above */
    case CP_HANDLER_BUFFERED:
    case CP_HANDLER_RET_START:
      cp__bump(&w->logged);
      cp__writer_append(w, id, RECORD_TSC);
      return;
    case CP_HANDLER_RET_END:
      cp__bump(&w->logged);
      cp__writer_append(w, id, RECORD_TSC);
      cp__ret_send(ch, id);
      return;
    case CP_HANDLER_XOY: {
      cp__bump(&w->logged);
      int64_t x = atomic_load_explicit(&ch->live_params[0], memory_order_relaxed);
      int64_t y = atomic_load_explicit(&ch->live_params[1], memory_order_relaxed);
      if (floor_mod(id, y) < x) cp__writer_append(w, id, RECORD_TSC);
      return;
    }
    case CP_HANDLER_FIRSTLAST: {
      cp__bump(&w->logged);
      uint64_t tsc = RECORD_TSC;
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

#undef RECORD_TSC

static void log_record(cp_channel *ch, cp_handler handler, int64_t id) { log_record_tsc(ch, handler, id, false, 0); }

/* The counting handlers are dispatched first: a few instructions each, no TSC read, no stack frame. The handler is
 * loaded once: a channel's close stores CP__HANDLER_CLOSED in it, so that a call which took the channel before the
 * close and reaches it after (a thread that stalled longer than a retired segment's grace) is counted, not lost. */
static inline __attribute__((always_inline)) void log_one_tsc(cp_channel *ch, int64_t id, bool given, uint64_t tsc) {
  cp_handler handler = atomic_load_explicit(&ch->handler, memory_order_relaxed);
  switch (handler) {
    case CP_HANDLER_SPC: cp__bump(&ch->calls); return;
    case CP_HANDLER_MPC: atomic_fetch_add_explicit(&ch->calls, 1, memory_order_relaxed); return;
    case CP_HANDLER_NULL: {
      cp_writer *w = cp__writer_of(ch); /* a per-thread count: threads do not contend */
      if (CP_LIKELY(w)) cp__bump(&w->logged);
      else atomic_fetch_add(&ch->dropped, 1);
      return;
    }
    default:
      if (CP_UNLIKELY(handler == CP__HANDLER_CLOSED)) cp__closed_calls(ch, 1);
      else if (given) log_record_tsc(ch, handler, id, true, tsc);
      else log_record(ch, handler, id);
  }
}

static inline void log_one(cp_channel *ch, int64_t id) { log_one_tsc(ch, id, false, 0); }

/* The channel that takes n records now: the handle's current one (a handle opened by rules switches by storing its
 * next segment, complete before the store; its old segment stays open a grace period for the calls that loaded
 * it); NULL, counting them, where none does (a NULL handle, a closed one). Two independent loads, as for a channel
 * that never switches. */
static inline cp_channel *accepting(cp_channel *handle, size_t n) {
  if (CP_UNLIKELY(!handle)) {
    atomic_fetch_add_explicit(&cp__lib.null_handle_logs, n, memory_order_relaxed);
    return NULL;
  }
  if (CP_UNLIKELY(!atomic_load_explicit(&handle->open, memory_order_relaxed))) {
    atomic_fetch_add_explicit(&handle->after_close, n, memory_order_relaxed);
    return NULL;
  }
  return atomic_load_explicit(&handle->current, memory_order_acquire);
}

void cp_log(cp_channel *handle, int64_t tuple_id) {
  cp_channel *ch = accepting(handle, 1);
  if (ch) log_one(ch, tuple_id);
}

void cp_log_at(cp_channel *handle, int64_t tuple_id, uint64_t tsc) {
  cp_channel *ch = accepting(handle, 1);
  if (ch) log_one_tsc(ch, tuple_id, true, tsc);
}

/* cp_log_many, cp_log_many_at and cp_log_batch: a buffered channel appends the whole array with one writer lookup;
 * record i takes tscs[i * stride] (stride 0: the one TSC of a batch), or with `tscs` NULL a TSC read now. */
static inline __attribute__((always_inline)) void log_many(cp_channel *handle, const int64_t *ids, const uint64_t *tscs,
                                                           size_t stride, size_t n) {
  cp_channel *ch = accepting(handle, n);
  if (!ch) return;
  if (atomic_load_explicit(&ch->handler, memory_order_relaxed) == CP_HANDLER_BUFFERED) {
    cp_writer *w = cp__writer_of(ch);
    if (CP_UNLIKELY(!w)) {
      atomic_fetch_add(&ch->dropped, n);
      return;
    }
    atomic_store_explicit(&w->logged, atomic_load_explicit(&w->logged, memory_order_relaxed) + n, memory_order_relaxed);
    for (size_t i = 0; i < n; i++) cp__writer_append(w, ids[i], tscs ? tscs[i * stride] : cp__tsc());
    return;
  }
  for (size_t i = 0; i < n; i++) log_one_tsc(ch, ids[i], tscs != NULL, tscs ? tscs[i * stride] : 0);
}

void cp_log_many(cp_channel *handle, const int64_t *ids, size_t n) { log_many(handle, ids, NULL, 1, n); }

void cp_log_batch(cp_channel *handle, const int64_t *ids, size_t n) {
  uint64_t tsc = cp__tsc();
  log_many(handle, ids, &tsc, 0, n);
}

bool cp__log_many_in_place(cp_channel *handle, const int64_t *ids, const uint64_t *tscs, uint32_t n,
                           void (*encoded)(void *), void *arg) {
  if (!handle || !atomic_load_explicit(&handle->open, memory_order_relaxed)) return false;
  cp_channel *ch = atomic_load_explicit(&handle->current, memory_order_acquire);
  return atomic_load_explicit(&ch->handler, memory_order_relaxed) == CP_HANDLER_BUFFERED &&
         cp__channel_submit_in_place(ch, ids, tscs, n, encoded, arg);
}

void cp_log_many_at(cp_channel *handle, const int64_t *ids, const uint64_t *tscs, size_t n) {
  log_many(handle, ids, tscs, 1, n);
}
