/* Per-thread writers and the block pool: each logging thread fills a block of its own, taken from the channel's
 * bounded pool, and hands filled ranges to the compression threads. */
#include <stdlib.h>
#include <string.h>

#include "writers.h"

__thread __attribute__((tls_model("initial-exec"))) cp_writer_slot cp__writer_slots[CP_WRITER_SLOTS];
static __thread __attribute__((tls_model("initial-exec"))) cp_writer *thread_writers;
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

/* ---- block pool ---- */

static cp_block *block_get(cp_channel *ch, bool wait) {
  cp_block *b = NULL;
  uint32_t cap = cp__lib.options.block_records;
  pthread_mutex_lock(&ch->pool_mutex);
  for (;;) {
    if (!atomic_load(&ch->open)) break;
    if ((b = ch->free_blocks)) {
      ch->free_blocks = b->next_free;
      break;
    }
    if (ch->blocks_allocated < cp__lib.options.channel_blocks) {
      b = malloc(sizeof *b + (size_t)cap * 16);
      if (b) {
        b->capacity = cap;
        b->ids = (int64_t *)(b + 1);
        b->tscs = (uint64_t *)(b->ids + cap);
        ch->all_blocks[ch->blocks_allocated++] = b;
      }
      break;
    }
    if (!wait) break;
    pthread_cond_wait(&ch->pool_cond, &ch->pool_mutex);
  }
  pthread_mutex_unlock(&ch->pool_mutex);
  if (b) atomic_store(&b->refs, 1);
  return b;
}

void cp__block_release(cp_channel *ch, cp_block *b) {
  if (atomic_fetch_sub(&b->refs, 1) != 1) return;
  pthread_mutex_lock(&ch->pool_mutex);
  b->next_free = ch->free_blocks;
  ch->free_blocks = b;
  pthread_cond_signal(&ch->pool_cond);
  pthread_mutex_unlock(&ch->pool_mutex);
}

/* Block memory of a closed channel, freed by the timer thread a while after the close so that a log racing
 * the close still writes into valid memory. */
void cp__channel_free_blocks(cp_channel *ch) {
  pthread_mutex_lock(&ch->pool_mutex);
  for (uint32_t i = 0; i < ch->blocks_allocated; i++) free(ch->all_blocks[i]);
  ch->blocks_allocated = 0;
  ch->free_blocks = NULL;
  pthread_mutex_unlock(&ch->pool_mutex);
}

/* ---- writers ---- */

/* Hands the records of the writer's block not yet submitted to the compression threads; w->mutex held. */
static void submit_range(cp_writer *w) {
  uint32_t filled = atomic_load_explicit(&w->filled, memory_order_acquire);
  if (!w->block || filled <= w->start) return;
  cp_channel *ch = w->channel;
  cp_job *job = calloc(1, sizeof *job);
  if (!job) {
    atomic_fetch_add(&ch->dropped, filled - w->start);
    w->start = filled;
    return;
  }
  atomic_fetch_add(&w->block->refs, 1);
  *job = (cp_job){.channel = ch,
                  .block = w->block,
                  .col0 = w->block->ids + w->start,
                  .col1 = w->block->tscs + w->start,
                  .rows = filled - w->start};
  w->start = filled;
  pthread_mutex_lock(&ch->mutex);
  job->seq = ch->next_seq++;
  pthread_mutex_unlock(&ch->mutex);
  cp__submit(job);
}

bool cp__channel_submit_in_place(cp_channel *ch, const int64_t *ids, const uint64_t *tscs, uint32_t rows,
                                 void (*encoded)(void *), void *arg) {
  cp_job *job = calloc(1, sizeof *job);
  if (!job) return false;
  *job = (cp_job){.channel = ch, .col0 = ids, .col1 = tscs, .rows = rows, .encoded = encoded, .encoded_arg = arg};
  atomic_fetch_add_explicit(&ch->in_place, rows, memory_order_relaxed);
  pthread_mutex_lock(&ch->mutex);
  job->seq = ch->next_seq++;
  pthread_mutex_unlock(&ch->mutex);
  cp__submit(job);
  return true;
}

void cp__writer_hand_off(cp_writer *w) {
  if (!w->block) return;
  submit_range(w);
  cp__block_release(w->channel, w->block);
  w->block = NULL;
}

/* Takes a full block away from its writer and gives it a fresh one; w->mutex held. */
static void writer_refill(cp_writer *w, bool wait) {
  cp__writer_hand_off(w);
  cp_block *b = block_get(w->channel, wait);
  if (b) {
    w->start = 0;
    atomic_store_explicit(&w->filled, 0, memory_order_relaxed);
    w->block = b;
  }
}

void cp__writer_append_slow(cp_writer *w, int64_t id, uint64_t tsc) {
  cp_channel *ch = w->channel;
  pthread_mutex_lock(&w->mutex);
  if (!w->block || atomic_load_explicit(&w->filled, memory_order_relaxed) >= w->block->capacity)
    writer_refill(w, cp__lib.options.full_policy == CP_FULL_BLOCK);
  if (w->block && atomic_load(&ch->open)) {
    uint32_t n = atomic_load_explicit(&w->filled, memory_order_relaxed);
    w->block->ids[n] = id;
    w->block->tscs[n] = tsc;
    atomic_store_explicit(&w->filled, n + 1, memory_order_release);
  } else {
    cp__bump(&w->dropped);
  }
  pthread_mutex_unlock(&w->mutex);
}

cp_writer *cp__writers_head(cp_channel *ch) {
  pthread_mutex_lock(&ch->mutex);
  cp_writer *w = ch->writers;
  pthread_mutex_unlock(&ch->mutex);
  return w;
}

void cp__channel_submit_writers(cp_channel *ch) {
  for (cp_writer *w = cp__writers_head(ch); w; w = w->next) {
    pthread_mutex_lock(&w->mutex);
    submit_range(w);
    pthread_mutex_unlock(&w->mutex);
  }
}

/* A thread that ends hands off what its blocks hold. */
static void thread_exit(void *unused) {
  (void)unused;
  for (cp_writer *w = thread_writers; w; w = w->thread_next) {
    pthread_mutex_lock(&w->mutex);
    if (atomic_load(&w->channel->open)) cp__writer_hand_off(w);
    pthread_mutex_unlock(&w->mutex);
  }
  thread_writers = NULL;
  memset(cp__writer_slots, 0, sizeof cp__writer_slots);
}

static void make_exit_key(void) { pthread_key_create(&exit_key, thread_exit); }

cp_writer *cp__writer_register(cp_channel *ch) {
  cp_writer *w = thread_writers;
  while (w && w->channel != ch) w = w->thread_next;
  if (!w) {
    w = calloc(1, sizeof *w);
    if (!w) return NULL;
    pthread_mutex_init(&w->mutex, NULL);
    w->channel = ch;
    pthread_once(&exit_key_once, make_exit_key);
    pthread_setspecific(exit_key, (void *)1);
    w->thread_next = thread_writers;
    thread_writers = w;
    pthread_mutex_lock(&ch->mutex);
    w->next = ch->writers;
    ch->writers = w;
    pthread_mutex_unlock(&ch->mutex);
  }
  cp_writer_slot *slot = &cp__writer_slots[ch->number % CP_WRITER_SLOTS];
  slot->channel = ch;
  slot->writer = w;
  return w;
}

void cp__log_at(cp_channel *ch, int64_t id, uint64_t tsc) {
  if (CP_UNLIKELY(!atomic_load_explicit(&ch->open, memory_order_relaxed))) {
    atomic_fetch_add_explicit(&ch->after_close, 1, memory_order_relaxed);
    return;
  }
  cp_writer *w = cp__writer_of(ch);
  if (CP_UNLIKELY(!w)) {
    atomic_fetch_add(&ch->dropped, 1);
    return;
  }
  cp__bump(&w->logged);
  cp__writer_append(w, id, tsc);
}
