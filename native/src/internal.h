/* Internal declarations shared by the library's source files. Nothing here is public API.
 *
 * Each file calls only files below it (but library.c's timer thread polls the rules file through cp_rules_set, and
 * its stop stops the inbox):
 *   inbox.c                        the owner's side of hand-off channels: their records into channels of its own
 *   handoff.c                      the writer's side of a hand-off channel (no thread, no file of its own)
 *   rules.c                        the rules, channels opened by them and their switches, the rules file
 *   handlers.c                     the handler table, cp_channel_open, the hot path
 *   library.c, counters.c, ret.c   start, the background threads, stop; the hooks of spc/mpc and of ReT
 *   channel.c, probe.c             a channel's file, flush, close and counts; the calibration probes
 *   samples.c                      the records' samples for cp_channel_samples_take
 *   writers.c                      per-thread writers and the block pool
 *   state.c, arrow_ipc.c, clock.c  what the files share; the Arrow IPC encoder; the TSC
 *   error.c                        cp__fail
 * Below handlers.c, what differs between handlers is read from the channel's descriptor, its hooks called
 * through it. */
#ifndef CP_INTERNAL_H
#define CP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <x86intrin.h>

#include "cloudprofiler.h"

#define CP_LIKELY(x) __builtin_expect(!!(x), 1)
#define CP_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define CP_INTERNAL __attribute__((visibility("hidden")))

/* ---- error.c ---- */
/* Returns `code` after filling `error` (when not NULL) with the formatted message. */
CP_INTERNAL int cp__fail(cp_error *error, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- clock.c ---- */

/* TSC simulation, set once by a constructor before any thread of the library exists:
 * sim(tsc) = tsc + offset + floor(tsc * skew_ppt / 1e12), skew in parts per trillion so that integer
 * arithmetic is exact. */
typedef struct cp_simulation {
  bool enabled;
  bool not_invariant; /* "invariant=0": the CPU is said not to have an invariant TSC */
  int64_t offset;
  int64_t skew_ppt;
} cp_simulation;
CP_INTERNAL extern cp_simulation cp__simulation;
/* cp_options.tsc_read of the running library (set by cp_start, read on every record). */
CP_INTERNAL extern bool cp__tsc_unordered;

static inline uint64_t cp__simulate(uint64_t tsc) {
  __int128 scaled = (__int128)tsc * cp__simulation.skew_ppt;
  __int128 q = scaled / 1000000000000LL;
  if (scaled < 0 && q * 1000000000000LL != scaled) q -= 1; /* floor, not truncation */
  return (uint64_t)((__int128)tsc + cp__simulation.offset + q);
}

/* cp_tsc() inlined into the hot paths: no call, no PLT, one predictable branch for the simulation. */
static inline uint64_t cp__tsc(void) {
  if (CP_LIKELY(!cp__tsc_unordered)) _mm_lfence();
  uint64_t tsc = __rdtsc();
  if (CP_UNLIKELY(cp__simulation.enabled)) return cp__simulate(tsc);
  return tsc;
}

/* ---- arrow_ipc.c: the encoder ---- */
typedef struct cp_buf {
  uint8_t *data;
  size_t len, cap;
  bool failed;
} cp_buf;

/* Where one record batch message lies in the file: Arrow's Block struct, in its flatbuffer layout
 * (little-endian, 24 bytes), so that the footer's vector is a copy of the channel's list. */
typedef struct cp_ipc_block {
  int64_t offset;   /* of the message's continuation marker */
  int32_t meta_len; /* framed metadata: marker, length, flatbuffer, padding */
  int32_t padding;
  int64_t body_len;
} cp_ipc_block;
_Static_assert(sizeof(cp_ipc_block) == 24, "Arrow's Block struct is 24 bytes");

CP_INTERNAL void cp__buf_free(cp_buf *b);
/* Schema message for the two int64 columns of a channel, with metadata pairs. */
CP_INTERNAL int cp__ipc_schema(cp_buf *out, int record_kind, const char *const *keys, const char *const *values,
                               size_t n);
/* Record batch message with two 8-byte columns of `rows` rows. */
CP_INTERNAL int cp__ipc_batch(cp_buf *out, const void *col0, const void *col1, uint32_t rows,
                              cp_compression compression, int zstd_level);
/* The end of a file: the end-of-stream marker, the footer (the schema with these metadata pairs and the
 * record batches' blocks), the footer's length and the closing magic. */
CP_INTERNAL int cp__ipc_file_end(cp_buf *out, int record_kind, const char *const *keys, const char *const *values,
                                 size_t n, const cp_ipc_block *blocks, size_t n_blocks);
CP_INTERNAL extern const uint8_t cp__ipc_eos[8];
CP_INTERNAL extern const uint8_t cp__ipc_magic[8]; /* "ARROW1" and two bytes of padding: a file's first bytes */

/* ---- ret.c ---- */
/* Keyed FNV-1a over secret || bytes: the tag of ReT acknowledgements, which only pair a handler's own records (see
 * the header for what it is and is not; probes are tagged with an HMAC, hmac.h). */
static inline uint64_t cp__tag_of(const uint8_t *secret, size_t secret_len, const void *data, size_t len) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < secret_len; i++) h = (h ^ secret[i]) * 0x100000001b3ull;
  for (size_t i = 0; i < len; i++) h = (h ^ ((const uint8_t *)data)[i]) * 0x100000001b3ull;
  return h;
}

/* ---- handler descriptors (the table is in handlers.c) ---- */
typedef struct cp_param_spec {
  const char *name;
  int64_t min, max;
  const char *expected; /* the range in words, for the error message */
  bool at_most_next;    /* may not exceed the parameter after it (xoy: x <= y) */
  bool secret;          /* kept out of the file's metadata (a shared key) */
} cp_param_spec;

/* What a channel's stats.logged counts. */
typedef enum cp_logged_count {
  CP_LOGGED_WRITERS = 0, /* the calls, counted by each thread's writer */
  CP_LOGGED_CALLS,       /* the channel's call counter (counters, downsample) */
  CP_LOGGED_KEPT,        /* the records kept (identity: every call is kept) */
} cp_logged_count;

/* One handler: its parameters, its file and the hooks through which the channel's life reaches it. A hook left
 * NULL does nothing. */
typedef struct cp_handler_kind {
  cp_handler handler;
  const char *name;
  int n_params;
  cp_param_spec params[3];
  int record_kind; /* file columns 0: tuple_id, tsc; 1: period_start_tsc, count */
  uint32_t batch;  /* rows the channel gathers under its mutex before it writes them (identity, counters) */
  bool blocks;     /* per-thread blocks -> compression threads -> IO thread */
  cp_logged_count logged;
  /* after the channel's file exists; an error discards the channel */
  int (*open)(cp_channel *ch, cp_error *error);
  /* after cp_channel_parameterize stored parameter `index` */
  void (*parameterized)(cp_channel *ch, uint32_t index);
  /* the timer thread, at the deadline it returned last (or sooner): returns the next one, UINT64_MAX once the
   * channel has closed */
  uint64_t (*sample)(cp_channel *ch, uint64_t now_tsc);
  /* first step of a close, before the records still held are written and the file ends */
  void (*close)(cp_channel *ch);
  /* a grace period after the close, when no cp_log can still be running on the channel (may come again) */
  void (*release)(cp_channel *ch);
  const struct cp_handler_kind *companion; /* ret_start: the handler of its "<name>.ack" channel */
} cp_handler_kind;

/* ---- blocks, jobs, writers and the channel ---- */
/* Blocks of records (SoA so that a column is a contiguous slice). */
typedef struct cp_block {
  struct cp_block *next_free;
  atomic_int refs; /* the writer that fills it + every submitted range not yet written */
  uint32_t capacity;
  int64_t *ids;
  uint64_t *tscs;
} cp_block;

/* A range of a block on its way to the file: compression thread -> IO thread. */
typedef struct cp_job {
  struct cp_job *next;
  struct cp_channel *channel;
  cp_block *block; /* NULL for jobs that carry their own columns */
  const int64_t *col0;
  const uint64_t *col1;
  uint32_t rows;
  uint64_t seq;
  uint8_t *message; /* encoded IPC message */
  size_t message_len;
  void *owned; /* freed with the job (columns copied out of a block) */
  /* Rows that lie in the caller's memory (a hand-off block of another process): called once they are encoded,
   * after which that memory may go (cp__channel_submit_in_place). */
  void (*encoded)(void *arg);
  void *encoded_arg;
} cp_job;

/* One thread's state for one channel: the block it fills without locks. */
typedef struct cp_writer {
  pthread_mutex_t mutex;   /* taken by the slow path and by flushers, never by the hot path */
  cp_block *block;         /* written only by the owning thread (under mutex) */
  _Atomic uint32_t filled; /* records in block, published with release */
  uint32_t start;          /* first record not yet submitted (under mutex) */
  _Atomic uint64_t logged;
  _Atomic uint64_t kept;
  _Atomic uint64_t dropped;
  int64_t first_id, last_id; /* firstlast */
  uint64_t first_tsc, last_tsc;
  bool has_first;
  struct cp_writer *next; /* channel's list */
  struct cp_writer *thread_next;
  struct cp_channel *channel;
} cp_writer;

struct cp_channel {
  uint32_t magic;
  /* What cp_log logs to, with the one atomic load of each call: the channel itself, or for a handle opened by
   * rules its current segment (rules.c stores the next one at a switch). */
  _Atomic(struct cp_channel *) current;
  _Atomic int open;
  _Atomic cp_handler handler;  /* what the hot path dispatches on (CP__HANDLER_CLOSED once closed) */
  const cp_handler_kind *kind; /* everything else about the handler */
  uint64_t number;
  int64_t params[3];
  _Atomic int64_t live_params[3]; /* cp_channel_parameterize changes these */
  char *name;
  char *path;
  char **meta_keys, **meta_values;
  size_t n_meta;
  cp_clock_reading open_clock, close_clock;
  bool has_close_clock;
  int fd;
  size_t header_len; /* of the schema message, which follows the magic */
  int io_error;

  pthread_mutex_t mutex; /* writers list, seq numbers, identity/counter batches */
  cp_writer *writers;
  uint64_t next_seq;           /* next sequence number to hand out */
  uint64_t written_seq;        /* sequence numbers < this are in the file (IO thread) */
  cp_job *pending;             /* encoded, waiting for their predecessors (IO thread) */
  cp_ipc_block *footer_blocks; /* every record batch in the file, for the footer; freed at close */
  size_t n_footer_blocks, footer_blocks_cap;
  bool footer_lost; /* that list could not grow: the file ends without a footer */
  pthread_cond_t written_cond;

  pthread_mutex_t pool_mutex; /* block pool */
  pthread_cond_t pool_cond;
  cp_block *free_blocks;
  uint32_t blocks_allocated;
  cp_block **all_blocks;

  pthread_mutex_t file_mutex; /* header rewrites and direct writes */

  /* identity and counters: a batch kept under `mutex` */
  int64_t *batch0;
  uint64_t *batch1;
  uint32_t batch_len, batch_cap;

  _Atomic uint64_t calls; /* downsample calls; counter value for spc/mpc */
  _Atomic uint64_t after_close;
  _Atomic uint64_t late; /* calls that reached a closed segment of this channel's handle: logged and dropped */
  _Atomic uint64_t rejected_blocks; /* hand-off blocks its inbox refused as malformed (inbox.c) */
  _Atomic uint64_t rejected_files;  /* hand-off memory its inbox refused unsealed (inbox.c) */
  _Atomic uint64_t in_place;        /* records submitted where they lay (the inbox's): logged and kept */
  _Atomic uint64_t dropped;
  _Atomic uint64_t kept; /* identity/counters/firstlast records kept */
  _Atomic uint64_t written;
  _Atomic uint64_t bytes_written;

  /* counters */
  uint64_t period_ticks, period_start_tsc, last_count, next_deadline_tsc;
  _Atomic uint64_t closed_tsc; /* set when close is done; block memory is freed a while after */

  /* segments.c: a handle over segments (no kind and no file: its handler and params are its rule's, or those it
   * was opened with; its number counts its switches; a failed roll is said once, until one succeeds), or a segment:
   * its switch.in and switch.out clocks (under file_mutex), the one before it, and its switch time once a newer one
   * took its place, after which the timer thread closes it */
  bool over_segments, roll_failed;
  bool is_segment;
  cp_clock_reading switch_clocks[2];
  bool has_switch_clock[2];
  struct cp_channel *previous_segment;
  struct cp_channel *handle; /* of a segment */
  _Atomic uint64_t retired_tsc;

  struct cp_channel *next_all;
  struct cp_ret *ret; /* ret_start/ret_end: the socket (and the start side's listener) */

  /* samples.c: the records kept for cp_channel_samples_take, under a mutex of their own (compression threads of one
   * channel sample at once, the taker runs on another thread, the identity batch writes hold ch->mutex); the array
   * (CP_SAMPLES_PER_CHANNEL) is allocated at the first sample and freed, `samples_done` set, once the channel has
   * closed and its samples have been taken. The level is read without the mutex by the scan of each batch. */
  pthread_mutex_t samples_mutex;
  struct cp_sample_row *samples;
  uint32_t n_samples;
  _Atomic uint32_t sample_level;
  bool samples_done;
};

#define CP_CHANNEL_MAGIC 0xC10DFACEu
#define CP__HANDLER_CLOSED ((cp_handler)CP_HANDLER_COUNT_) /* the dispatch value of a closed channel */
#define CP_META_MAX 64                                     /* the caller's metadata pairs of one channel */
#define CP_SEGMENT_KEYS 6                                  /* the most a segment adds to them (rules.*, switch.*) */

/* ---- state.c ---- */
typedef struct cp_library {
  pthread_mutex_t mutex;
  _Atomic int started;
  cp_options options;
  char *log_dir;
  char host[256];
  char boot_id[64];
  cp_tsc_frequency frequency;
  struct cp_channel *channels;
  uint64_t channels_opened;
  _Atomic uint64_t null_handle_logs;
  _Atomic uint64_t sample_scan_ticks, sample_scanned; /* the samples' scan: its time (raw TSC ticks) and rows */
  /* queues */
  pthread_mutex_t queue_mutex;
  pthread_cond_t compress_cond, io_cond, timer_cond;
  cp_job *compress_head, *compress_tail;
  cp_job *io_head, *io_tail;
  bool stopping;
  pthread_t *compress_threads;
  uint32_t n_compress_threads;
  pthread_t io_thread, timer_thread;
  bool timer_wakeup;
} cp_library;

CP_INTERNAL extern cp_library cp__lib;
/* Appends a job to a queue and wakes its thread; queue_mutex held. */
CP_INTERNAL void cp__enqueue(cp_job **head, cp_job **tail, pthread_cond_t *cond, cp_job *job);
CP_INTERNAL void cp__submit(cp_job *job); /* to the compression pool */
CP_INTERNAL void cp__timer_kick(void);    /* a sampled channel opened or changed its period: new deadlines */
CP_INTERNAL uint64_t cp__ns_to_ticks(uint64_t ns);

/* ---- samples.c ---- */
/* Keeps the rows of the channel's samples (see cp_channel_samples_take) as they go to its file: a compression
 * thread's job before it is encoded (in-place rows while their memory is still valid), a batch that channel.c
 * writes; a channel of periods (spc, mpc) keeps none. Any thread, any lock of the channel held but samples_mutex. */
CP_INTERNAL void cp__channel_sample_rows(cp_channel *ch, const int64_t *ids, const uint64_t *tscs, uint32_t rows);

/* ---- channel.c ---- */
CP_INTERNAL void cp__clock_json(char *out, size_t cap, const cp_clock_reading *r);
/* A segment's switch.in (which 0) or switch.out (1): the clock of now. */
CP_INTERNAL void cp__channel_set_switch_clock(cp_channel *ch, int which);
/* A channel of this handler with its file; the library has started and the parameters passed the handler's check.
 * `segment`: a handle's segment, whose metadata has switch.in and switch.out. */
CP_INTERNAL cp_channel *cp__channel_create(const char *name, const cp_handler_kind *kind, const int64_t *params,
                                           const char *const *meta_keys, const char *const *meta_values, size_t n_meta,
                                           bool segment, cp_error *error);
/* Into the library's list, which cp_stop closes, a fork marks closed, and the timer thread walks (it skips handles
 * opened by rules, whose segments are in the list too). */
CP_INTERNAL void cp__channel_list_add(cp_channel *ch);
/* n calls that reached ch after its close: dropped records of its handle's current segment, whose file counts them,
 * for a segment of a handle still open; otherwise calls after the close. */
CP_INTERNAL void cp__closed_calls(cp_channel *ch, uint64_t n);
/* 0, or EBADF naming `what` when the handle is no channel or a closed one. */
CP_INTERNAL int cp__channel_check_open(const cp_channel *ch, const char *what, cp_error *error);
/* Rewrites the schema message in place with the metadata of now (padded values keep its length). */
CP_INTERNAL void cp__channel_write_header(cp_channel *ch);
/* Appends a record batch message to the file and its block to the footer's list; ch->mutex held. */
CP_INTERNAL int cp__channel_write_message(cp_channel *ch, const uint8_t *msg, size_t len);
/* Writes these rows as one record batch, counted as written or, when that fails, as dropped; ch->mutex held. */
CP_INTERNAL void cp__channel_write_rows(cp_channel *ch, const int64_t *col0, const uint64_t *col1, uint32_t rows);
CP_INTERNAL void cp__channel_write_batch(cp_channel *ch); /* identity/counter batch, ch->mutex held */

/* ---- counters.c: spc and mpc ---- */
CP_INTERNAL int cp__counter_open(cp_channel *ch, cp_error *error);
CP_INTERNAL void cp__counter_parameterized(cp_channel *ch, uint32_t index);
CP_INTERNAL uint64_t cp__counter_sample(cp_channel *ch, uint64_t now_tsc);
CP_INTERNAL void cp__counter_close(cp_channel *ch);

/* ---- ret.c ---- */
typedef struct cp_ret cp_ret;
CP_INTERNAL int cp__ret_open(cp_channel *ch, cp_error *error);
CP_INTERNAL void cp__ret_send(cp_channel *ch, int64_t tuple_id);
CP_INTERNAL void cp__ret_start_close(cp_channel *ch);
CP_INTERNAL void cp__ret_end_release(cp_channel *ch); /* closes ret_end's socket */

/* ---- handlers.c ---- */
CP_INTERNAL const cp_handler_kind *cp__handler_kind(cp_handler handler);
/* cp_channel_open's checks of a name and its metadata pairs (at most `max_meta`) */
CP_INTERNAL int cp__channel_args_check(const char *name, const char *const *meta_keys, const char *const *meta_values,
                                       size_t n_meta, size_t max_meta, cp_error *error);

/* cp_log_many_at for rows that may stay where they lie until they are encoded (the inbox's hand-off blocks): a
 * buffered channel submits them in place, with one look-up of the handle's current segment for them all, and
 * encoded(arg) is called once they are encoded; false, with nothing done, when the channel takes them otherwise
 * (another handler, a closed handle, no memory for the job): the caller logs them with cp_log_many_at, which copies
 * and counts them. */
CP_INTERNAL bool cp__log_many_in_place(cp_channel *handle, const int64_t *ids, const uint64_t *tscs, uint32_t n,
                                       void (*encoded)(void *), void *arg);

/* ---- segments.c ---- */
/* A handle over segments and its first one, of this handler; `rule`: the rule that chose it (NULL for
 * cp_channel_open). Into the library's list; NULL with nothing left behind on failure. */
CP_INTERNAL cp_channel *cp__handle_open(const char *name, const cp_handler_kind *kind, const int64_t *params,
                                        const char *rule, const char *const *meta_keys, const char *const *meta_values,
                                        size_t n_meta, cp_error *error);
/* Points the handle at a new segment of this handler (handle->mutex held): every record of the new segment is taken
 * after its switch.in, every call that starts after the old one's switch.out logs to the new one. The old segment
 * stays open a grace period for calls still inside it (the timer thread closes it). 0, or the error of the new
 * file (the handle then keeps its segment). */
CP_INTERNAL int cp__handle_switch(cp_channel *handle, const cp_handler_kind *kind, const int64_t *params,
                                  const char *rule, const char *reason, cp_error *error);
/* Whether the handle's current segment has passed cp_options.roll_bytes (the timer thread asks, without locks). */
CP_INTERNAL bool cp__handle_roll_due(const cp_channel *handle);
/* Switches the handle to a new segment of the same handler and parameters if it is still due (the timer thread). */
CP_INTERNAL void cp__handle_roll(cp_channel *handle);

/* ---- rules.c ---- */
/* Reads the file CLOUDPROFILER_RULES names when it changed since the last call (the library's start, then the
 * timer thread); returns whether a file is followed. */
CP_INTERNAL bool cp__rules_file_poll(void);

/* ---- library.c ---- */
CP_INTERNAL int cp__ensure_started(cp_error *error);

/* ---- slice.c ---- */
/* Asks for a short scheduler time slice for the calling thread; returns the slice to give back (0: unchanged). */
CP_INTERNAL uint64_t cp__short_slice(void);
/* Gives the calling thread back the slice cp__short_slice returned. */
CP_INTERNAL void cp__restore_slice(uint64_t before);

#endif
