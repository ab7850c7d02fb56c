/* The records' samples (cp_channel_samples_take): each channel of records keeps those whose id's level is at least
 * the channel's level, at most CP_SAMPLES_PER_CHANNEL, raising its level when one more would not fit. The rows are
 * scanned as they go to the file (compression threads, batch writes), never on the hot path. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct cp_sample_row {
  int64_t id;
  uint64_t tsc;
} cp_sample_row;

/* splitmix64's output of an id: its trailing zero bits are the id's level. The driver (Java) computes the same. */
static inline uint64_t mix(int64_t id) {
  uint64_t z = (uint64_t)id + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint32_t cp_sample_level(int64_t id) {
  uint64_t z = mix(id);
  return z ? (uint32_t)__builtin_ctzll(z) : 64;
}

/* An id is of level >= L when the low L bits of its mix are 0; no id is of level 65 or more. */
static inline uint64_t level_mask(uint32_t level) { return level >= 64 ? UINT64_MAX : (1ULL << level) - 1; }
static inline bool qualifies(int64_t id, uint32_t level) { return level <= 64 && !(mix(id) & level_mask(level)); }

/* Rows the scan reads at a time: a chunk without a sample (most of them, once the level has risen) costs only its
 * mix and compare per row, in a loop of a known count without branches, which the compiler vectorizes; a chunk
 * with one is scanned again under the mutex (short chunks: less of that while the level is low). */
enum { CHUNK = 64 };

/* Whether a row of a full chunk may qualify under this mask (the level read without the mutex). */
static inline __attribute__((always_inline)) bool hits_in(const int64_t *ids, uint64_t mask) {
  uint64_t hits = 0;
  for (uint32_t i = 0; i < CHUNK; i++) hits |= (mix(ids[i]) & mask) == 0;
  return hits != 0;
}

static bool chunk_hits_baseline(const int64_t *ids, uint64_t mask) { return hits_in(ids, mask); }

#if defined(__x86_64__) && defined(__GNUC__)
/* The multiplies in AVX-512 (vpmullq) or AVX2 lanes where the CPU has them, picked at the first scan (not with
 * target_clones: its ifunc resolver runs before the sanitizers' runtime is up). On an AMD EPYC, at a level reached:
 * about 0.3, 0.7 and 1.5 to 2 ns a row. */
__attribute__((target("avx512f,avx512dq"))) static bool chunk_hits_avx512(const int64_t *ids, uint64_t mask) {
  return hits_in(ids, mask);
}
__attribute__((target("avx2"))) static bool chunk_hits_avx2(const int64_t *ids, uint64_t mask) {
  return hits_in(ids, mask);
}

static bool (*pick_chunk_hits(void))(const int64_t *, uint64_t) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) return chunk_hits_avx512;
  return __builtin_cpu_supports("avx2") ? chunk_hits_avx2 : chunk_hits_baseline;
}
#else
static bool (*pick_chunk_hits(void))(const int64_t *, uint64_t) { return chunk_hits_baseline; }
#endif

static bool chunk_hits(const int64_t *ids, uint64_t mask) {
  static bool (*_Atomic picked)(const int64_t *, uint64_t); /* a race picks the same twice */
  bool (*hits)(const int64_t *, uint64_t) = atomic_load_explicit(&picked, memory_order_relaxed);
  if (CP_UNLIKELY(!hits)) atomic_store_explicit(&picked, hits = pick_chunk_hits(), memory_order_relaxed);
  return hits(ids, mask);
}

/* The rows of a chunk that qualify at the channel's level now, under samples_mutex. */
static void keep_rows(cp_channel *ch, const int64_t *ids, const uint64_t *tscs, uint32_t rows) {
  pthread_mutex_lock(&ch->samples_mutex);
  /* Without memory the channel keeps no samples until an allocation succeeds (samples are no records: nothing is
   * counted as dropped for them). */
  if (!ch->samples && !ch->samples_done) ch->samples = malloc(CP_SAMPLES_PER_CHANNEL * sizeof *ch->samples);
  uint32_t level = atomic_load_explicit(&ch->sample_level, memory_order_relaxed);
  for (uint32_t i = 0; ch->samples && i < rows; i++) {
    if (!qualifies(ids[i], level)) continue;
    while (ch->n_samples == CP_SAMPLES_PER_CHANNEL) { /* full: the level rises, the samples below it go */
      level++;
      uint32_t kept = 0;
      for (uint32_t k = 0; k < ch->n_samples; k++)
        if (qualifies(ch->samples[k].id, level)) ch->samples[kept++] = ch->samples[k];
      ch->n_samples = kept;
    }
    atomic_store_explicit(&ch->sample_level, level, memory_order_relaxed);
    if (qualifies(ids[i], level)) ch->samples[ch->n_samples++] = (cp_sample_row){ids[i], tscs[i]};
  }
  pthread_mutex_unlock(&ch->samples_mutex);
}

void cp__channel_sample_rows(cp_channel *ch, const int64_t *ids, const uint64_t *tscs, uint32_t rows) {
  if (ch->kind->record_kind != 0) return; /* periods (spc, mpc), not records */
  uint64_t began = __rdtsc(); /* the scan's own cost, which the Spark UI's tab states: raw ticks, never simulated */
  uint32_t at = 0;
  for (; at < rows; at += CHUNK) {
    uint32_t n = rows - at < CHUNK ? rows - at : CHUNK;
    uint32_t level = atomic_load_explicit(&ch->sample_level, memory_order_relaxed);
    if (level > 64) break; /* past the one id of level 64, logged CP_SAMPLES_PER_CHANNEL times: none qualifies */
    uint64_t mask = level_mask(level), hits = 0;
    if (n == CHUNK) hits = chunk_hits(ids + at, mask);
    else
      for (uint32_t i = 0; i < n; i++) hits |= (mix(ids[at + i]) & mask) == 0;
    if (hits) keep_rows(ch, ids + at, tscs + at, n); /* checks each row again at the level under the mutex */
  }
  atomic_fetch_add_explicit(&cp__lib.sample_scan_ticks, __rdtsc() - began, memory_order_relaxed);
  atomic_fetch_add_explicit(&cp__lib.sample_scanned, at < rows ? at : rows, memory_order_relaxed);
}

size_t cp_channel_samples_take(cp_channel_sample *out, size_t cap) {
  size_t n = 0;
  pthread_mutex_lock(&cp__lib.mutex); /* channels are never freed; the list only grows at its head */
  for (cp_channel *ch = cp__lib.channels; ch; ch = ch->next_all) {
    if (ch->over_segments) continue; /* its segments are in the list, with the samples */
    pthread_mutex_lock(&ch->samples_mutex);
    uint32_t level = atomic_load_explicit(&ch->sample_level, memory_order_relaxed);
    uint32_t taken = ch->n_samples < cap - n ? ch->n_samples : (uint32_t)(cap - n);
    for (uint32_t i = 0; i < taken; i++)
      out[n++] = (cp_channel_sample){ch->name, ch->samples[i].id, ch->samples[i].tsc, level};
    ch->n_samples -= taken; /* the rest for the next take */
    if (ch->n_samples) memmove(ch->samples, ch->samples + taken, ch->n_samples * sizeof *ch->samples);
    /* Closed: every row of its file has been scanned (the close waits for them), so nothing more comes. */
    if (!ch->n_samples && atomic_load(&ch->closed_tsc)) {
      free(ch->samples);
      ch->samples = NULL;
      ch->samples_done = true;
    }
    pthread_mutex_unlock(&ch->samples_mutex);
  }
  pthread_mutex_unlock(&cp__lib.mutex);
  return n;
}
