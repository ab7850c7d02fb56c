/* Handles over segments. A channel handle (every handler but ret_start and ret_end) logs to its current segment, a
 * channel with a file of its own; a switch opens the next segment (a new file, the next channel number), points the
 * handle at it and retires the old one, which the timer thread closes a grace period later. Rules switch a handle
 * to another handler (rules.c); a roll switches it to a new file of the same handler once its file has passed
 * cp_options.roll_bytes, so that a process that runs for days writes files that end and never grow without bound. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *meta_of(const cp_channel *ch, const char *key) {
  for (size_t i = 0; i < ch->n_meta; i++)
    if (strcmp(ch->meta_keys[i], key) == 0) return ch->meta_values[i];
  return NULL;
}

/* handler[:param...] of a segment, for switch.previous. */
static void handler_text(char *out, size_t cap, const cp_channel *segment) {
  int used = snprintf(out, cap, "%s", segment->kind->name);
  for (int i = 0; i < segment->kind->n_params; i++)
    used += snprintf(out + used, cap - (size_t)used, ":%" PRId64, segment->params[i]);
}

/* Segment `number` of the handle (0: its first) with this handler; `rule`: the rule that chose it (NULL for a
 * channel not opened by rules), `reason`: why it opens ("open", "rules" or "roll"). */
static cp_channel *open_segment(cp_channel *handle, const cp_handler_kind *kind, const int64_t *params,
                                const char *rule, const char *reason, uint64_t number, cp_error *error) {
  char segment[24], previous[128] = "";
  snprintf(segment, sizeof segment, "%" PRIu64, number);
  if (number) handler_text(previous, sizeof previous, atomic_load(&handle->current));
  const char *keys[CP_META_MAX + CP_SEGMENT_KEYS], *values[CP_META_MAX + CP_SEGMENT_KEYS];
  size_t n = 0;
#define KV(k, v) (keys[n] = (k), values[n] = (v), n++)
  for (size_t i = 0; i < handle->n_meta; i++) KV(handle->meta_keys[i], handle->meta_values[i]);
  if (rule) KV("rules.rule", rule), KV("rules.segment", segment), KV("switch.previous", previous);
  KV("switch.reason", reason); /* switch.in and switch.out: the channel's own (cp__channel_set_switch_clock) */
#undef KV
  cp_channel *next = cp__channel_create(handle->name, kind, params, keys, values, n, true, error);
  if (next) next->handle = handle;
  return next;
}

cp_channel *cp__handle_open(const char *name, const cp_handler_kind *kind, const int64_t *params, const char *rule,
                            const char *const *meta_keys, const char *const *meta_values, size_t n_meta,
                            cp_error *error) {
  cp_channel *handle = calloc(1, sizeof *handle);
  char **keys = calloc(n_meta + 1, sizeof(char *)), **values = calloc(n_meta + 1, sizeof(char *));
  bool copied = handle && keys && values && (handle->name = strdup(name));
  for (size_t i = 0; copied && i < n_meta; i++)
    copied = (keys[i] = strdup(meta_keys[i])) && (values[i] = strdup(meta_values[i]));
  cp_channel *first = NULL;
  if (copied) {
    handle->magic = CP_CHANNEL_MAGIC;
    handle->over_segments = true;
    handle->handler = kind->handler;
    for (int i = 0; i < kind->n_params; i++) handle->params[i] = params[i];
    handle->meta_keys = keys, handle->meta_values = values, handle->n_meta = n_meta;
    pthread_mutex_init(&handle->mutex, NULL);
    first = open_segment(handle, kind, params, rule, "open", 0, error);
  } else {
    cp__fail(error, ENOMEM, "out of memory");
  }
  if (first) {
    atomic_store(&handle->current, first);
    atomic_store(&handle->open, 1);
    cp__channel_list_add(handle);
    return handle;
  }
  for (size_t i = 0; i < n_meta && keys && values; i++) free(keys[i]), free(values[i]);
  free(keys), free(values);
  if (handle) free(handle->name);
  free(handle);
  return NULL;
}

int cp__handle_switch(cp_channel *handle, const cp_handler_kind *kind, const int64_t *params, const char *rule,
                      const char *reason, cp_error *error) {
  cp_channel *old = atomic_load(&handle->current);
  cp_channel *next = open_segment(handle, kind, params, rule, reason, handle->number + 1, error);
  if (!next) return error ? error->code : EIO;
  next->previous_segment = old;
  cp__channel_set_switch_clock(next, 0);
  atomic_store_explicit(&handle->current, next, memory_order_release);
  cp__channel_set_switch_clock(old, 1);
  atomic_store(&old->retired_tsc, cp_tsc());
  cp__timer_kick(); /* its close is due a grace period from now */
  handle->number++;
  return 0;
}

/* A segment rolls once its file has passed the roll size with records in it (an idle channel never rolls). */
static bool roll_due(const cp_channel *segment) {
  uint64_t limit = (uint64_t)cp__lib.options.roll_bytes;
  return limit && atomic_load(&segment->open) && !atomic_load(&segment->retired_tsc) &&
         atomic_load(&segment->written) && atomic_load(&segment->bytes_written) >= limit;
}

bool cp__handle_roll_due(const cp_channel *handle) {
  return atomic_load(&handle->open) && roll_due(atomic_load(&handle->current));
}

void cp__handle_roll(cp_channel *handle) {
  pthread_mutex_lock(&handle->mutex);
  cp_channel *old = atomic_load(&handle->current);
  if (atomic_load(&handle->open) && roll_due(old)) {
    int64_t params[3];
    for (int i = 0; i < 3; i++) params[i] = atomic_load(&old->live_params[i]);
    cp_error error;
    if (cp__handle_switch(handle, old->kind, params, meta_of(old, "rules.rule"), "roll", &error) == 0)
      handle->roll_failed = false;
    else if (!handle->roll_failed) { /* said once: the timer tries again at every wake */ handle->roll_failed = true;
      fprintf(stderr, "cloudprofiler: channel '%s' goes on writing %s past its roll size: %s\n", handle->name,
              old->path, error.message);
    }
  }
  pthread_mutex_unlock(&handle->mutex);
}
