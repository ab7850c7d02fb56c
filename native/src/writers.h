/* Per-thread writers and the block pool (writers.c), with the functions the hot path inlines. */
#ifndef CP_WRITERS_H
#define CP_WRITERS_H

#include "internal.h"

/* The calling thread's writers, cached by channel number so that the hot path finds its own without a lock. */
#define CP_WRITER_SLOTS 16
typedef struct cp_writer_slot {
  cp_channel *channel;
  cp_writer *writer;
} cp_writer_slot;
CP_INTERNAL extern __thread __attribute__((tls_model("initial-exec"))) cp_writer_slot cp__writer_slots[CP_WRITER_SLOTS];

/* The calling thread's writer of the channel, made on its first record; NULL when out of memory. */
CP_INTERNAL cp_writer *cp__writer_register(cp_channel *ch);
CP_INTERNAL void cp__writer_append_slow(cp_writer *w, int64_t id, uint64_t tsc);
/* Submits what the writer's block holds and gives the block back; w->mutex held. */
CP_INTERNAL void cp__writer_hand_off(cp_writer *w);
/* Writers are only ever added at the head, under ch->mutex, and never freed: a snapshot of the head can be
 * walked without the lock. */
CP_INTERNAL cp_writer *cp__writers_head(cp_channel *ch);
CP_INTERNAL void cp__channel_submit_writers(cp_channel *ch); /* hand off every partial block */
/* Submits rows that stay where they lie until a compression thread has encoded them and called encoded(arg),
 * counted as logged and kept (cp__log_many_in_place); false, with nothing submitted, when out of memory. */
CP_INTERNAL bool cp__channel_submit_in_place(cp_channel *ch, const int64_t *ids, const uint64_t *tscs, uint32_t rows,
                                             void (*encoded)(void *), void *arg);
CP_INTERNAL void cp__block_release(cp_channel *ch, cp_block *block);
CP_INTERNAL void cp__channel_free_blocks(cp_channel *ch);
/* A record with a TSC read earlier: the ReT listener stamps a datagram before checking it. */
CP_INTERNAL void cp__log_at(cp_channel *ch, int64_t tuple_id, uint64_t tsc);

static inline cp_writer *cp__writer_of(cp_channel *ch) {
  cp_writer_slot *slot = &cp__writer_slots[ch->number % CP_WRITER_SLOTS];
  if (CP_LIKELY(slot->channel == ch)) return slot->writer;
  return cp__writer_register(ch);
}

/* Single-writer counters: the owning thread is the only one that stores. */
static inline void cp__bump(_Atomic uint64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

static inline void cp__writer_append(cp_writer *w, int64_t id, uint64_t tsc) {
  cp__bump(&w->kept);
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

#endif
