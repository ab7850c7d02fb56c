/*
 * libcloudprofiler: TSC timestamps for (tuple id) records, logged through channels and handlers into
 * Arrow IPC files.
 *
 * This header is the whole public API. The JNI class (jvm-plugin/) and the cffi binding
 * (python/cloudprofiler/) wrap it function for function. Every public name starts with `cp_`; names with a
 * leading `cp__` are internal.
 *
 * Errors: functions that can fail return 0 on success or an errno value and, when `error` is not NULL, fill it
 * with a message that names the bad value and says what was expected. The library's own codes: EINVAL (a bad
 * argument), EBADF (not a channel handle, or a closed channel), EALREADY (cp_start after the start), ENOMEM,
 * EAGAIN (a thread could not start; cp_clock_read: the thread kept moving between CPUs), ENOTSUP (no invariant
 * TSC), EIO (a write that wrote nothing, a frequency calibration that saw no time pass), ECONNREFUSED and
 * ETIMEDOUT (probes). Where a system call fails, its own errno: creating the log folder or a file (ENOENT,
 * EACCES, ENOTDIR, EROFS, ...), writing a file (ENOSPC, EDQUOT, EIO, ...), opening a socket (EADDRINUSE,
 * EADDRNOTAVAIL, ENETUNREACH, ...). Hot-path functions never fail: what they cannot do is counted.
 *
 * Threads: every function may be called from any thread unless its section says otherwise.
 */
#ifndef CLOUDPROFILER_H
#define CLOUDPROFILER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CP_EXPORT __attribute__((visibility("default")))
#else
#define CP_EXPORT
#endif

/* ==== Version ============================================================================================
 * Bindings compare cp_version() with the CP_VERSION_NUMBER they were built against and refuse a mismatch of
 * major or minor version with a message that names both. */
#define CP_VERSION_MAJOR 0
#define CP_VERSION_MINOR 1
#define CP_VERSION_PATCH 0
#define CP_VERSION_NUMBER (CP_VERSION_MAJOR * 10000 + CP_VERSION_MINOR * 100 + CP_VERSION_PATCH)

CP_EXPORT int cp_version(void);
CP_EXPORT const char *cp_version_string(void);

/* ==== Errors ============================================================================================= */
typedef struct cp_error {
  int code;          /* errno value, 0 when no error */
  char message[512]; /* NUL-terminated, names the bad value */
} cp_error;

/* ==== Clock ==============================================================================================
 * All TSC values the library produces (records, clock readings, probes) come from cp_tsc(), so the TSC
 * simulation below applies to all of them.
 *
 * Simulation (a test feature, off by default): the environment variable CLOUDPROFILER_SIMULATE_TSC, read once
 * at load, e.g. "offset=36000000000000,skew_ppm=-25.5", makes every TSC value of this process
 *   sim(tsc) = tsc + offset + floor(tsc * skew_ppm / 1e6)
 * so that processes on one machine behave like separate TSC domains with known truth; ",invariant=0" also makes
 * cp_tsc_is_invariant() report 0, as on a CPU without an invariant TSC. Files record the simulation parameters in
 * their metadata. */

/* The TSC read of every record, as cp_options.tsc_read sets it: ordered (lfence; rdtsc, the default) or
 * unordered (rdtsc). */
CP_EXPORT uint64_t cp_tsc(void);
/* rdtscp: the TSC and the id of the CPU the read ran on (cpu_id may be NULL). */
CP_EXPORT uint64_t cp_tscp(uint32_t *cpu_id);

typedef struct cp_clock_reading {
  uint64_t tsc;               /* midpoint of the TSC reads that bracket the clock_gettime calls */
  int64_t monotonic_raw_ns;   /* CLOCK_MONOTONIC_RAW */
  int64_t realtime_ns;        /* CLOCK_REALTIME */
  uint64_t uncertainty_ticks; /* half the TSC width of the bracket: |true tsc - tsc| <= this */
  uint32_t cpu_id;
} cp_clock_reading;

/* The paper's clock_gettime_tsc: the tightest of a few bracketed readings. */
CP_EXPORT int cp_clock_read(cp_clock_reading *out, cp_error *error);

/* 1 when CPUID reports an invariant TSC (constant and nonstop), else 0. */
CP_EXPORT int cp_tsc_is_invariant(void);
/* This process's TSC simulation as files record it in their metadata (tsc.simulation): "null", or JSON
 * {"offset":..,"skew_ppm":..,"invariant":..}. A process that stamps values for another to log (the generator's
 * emitters) states its clock with it and its boot id. */
CP_EXPORT const char *cp_tsc_simulation(void);
/* Cross-node features call this first: 0 with an invariant TSC or when `force` is set, else ENOTSUP with a
 * message saying why measurements across nodes would be wrong and how to force. */
CP_EXPORT int cp_require_invariant_tsc(int force, cp_error *error);

typedef enum cp_frequency_source {
  CP_FREQUENCY_CPUID = 1,      /* CPUID leaf 0x15 (crystal ratio), exact up to the crystal's tolerance */
  CP_FREQUENCY_CALIBRATED = 2, /* measured against CLOCK_MONOTONIC_RAW */
} cp_frequency_source;

typedef struct cp_tsc_frequency {
  double hz;
  double uncertainty_hz; /* the true frequency lies in hz +- uncertainty_hz */
  cp_frequency_source source;
} cp_tsc_frequency;

/* Computed once per process (calibration takes about 50 ms), then cached. */
CP_EXPORT int cp_tsc_frequency_get(cp_tsc_frequency *out, cp_error *error);

/* ==== Library start, flush and stop ======================================================================
 * cp_start() is optional: the first cp_channel_open() starts the library with the defaults of
 * cp_options_init(). cp_start() after the library has started returns EALREADY. The library registers an
 * atexit() hook that flushes and closes every channel; it installs no signal handlers. Hosts that own their
 * shutdown (JVM shutdown hooks, Python atexit) call cp_flush_all() or cp_stop() themselves. */

typedef enum cp_compression {
  CP_COMPRESSION_NONE = 0,
  CP_COMPRESSION_ZSTD = 1, /* Arrow IPC body compression, codec ZSTD, one frame per buffer */
} cp_compression;

typedef enum cp_full_policy {
  CP_FULL_BLOCK = 0, /* a logging thread waits for a free block (nothing is lost) */
  CP_FULL_DROP = 1,  /* a record that finds no free block is dropped and counted */
} cp_full_policy;

/* How records read the TSC. Ordered: lfence; rdtsc, so every earlier instruction has completed when the counter is
 * read, like the paper's rdtscp. Unordered: a bare rdtsc, about half the cost on common x86 machines, which
 * the CPU may execute before the instructions just ahead of it have finished: the value can be early by up to the
 * out-of-order window (tens of ns), never by more. Calibration probes and clock readings are always ordered. */
typedef enum cp_tsc_read {
  CP_TSC_ORDERED = 0,
  CP_TSC_UNORDERED = 1,
} cp_tsc_read;

typedef struct cp_options {
  const char *log_dir;          /* NULL: $CLOUDPROFILER_LOG_DIR, else <tmpdir>/cloudprofiler-logs;
                                   created if missing; the folder in use is printed once on stderr */
  uint32_t block_records;       /* records per block (16 bytes each); default 65536 */
  uint32_t channel_blocks;      /* blocks one channel may hold at once (its memory bound); default 16,
                                   i.e. 16 MiB per channel with the default block size */
  uint32_t compression_threads; /* default 1 */
  cp_compression compression;   /* default CP_COMPRESSION_NONE */
  int zstd_level;               /* default 1 */
  cp_full_policy full_policy;   /* default CP_FULL_BLOCK */
  uint32_t flush_interval_ms;   /* partial blocks older than this are written; default 1000, 0 = never */
  cp_tsc_read tsc_read;         /* default CP_TSC_ORDERED; files record it as metadata tsc.read */
  int64_t roll_bytes;           /* a channel's file rolls into a new segment once it has passed this size (see
                                   Channels); -1 (the default): $CLOUDPROFILER_ROLL_BYTES, else
                                   CP_ROLL_BYTES_DEFAULT; 0: never; else at least CP_ROLL_BYTES_MIN */
} cp_options;

#define CP_ROLL_BYTES_DEFAULT (64 << 20)
#define CP_ROLL_BYTES_MIN 65536

CP_EXPORT void cp_options_init(cp_options *options);
CP_EXPORT int cp_start(const cp_options *options, cp_error *error);
/* The log folder in use (started library), else NULL. The string lives until cp_stop(). */
CP_EXPORT const char *cp_log_dir(void);
/* Every record logged before the call is in its file when it returns. */
CP_EXPORT int cp_flush_all(cp_error *error);
/* Flush and close every channel and join the threads. Handles stay safe to log to (counted no-ops). Returns 0,
 * or the error of the first channel whose close failed (a write that failed); every such failure is also
 * reported on stderr, naming the channel. */
CP_EXPORT int cp_stop(void);

/* ==== Channels ===========================================================================================
 * A channel is a named stream of records of one process, written to one file
 *   <log_dir>/<safe name>.<host>.<pid>.<channel number>.arrows
 * where the safe name keeps [A-Za-z0-9._-] of the name and replaces every other byte with '_'.
 *
 * File: the Arrow IPC file format. While the channel is open: the magic "ARROW1\0\0", the schema message and
 * a record batch message per batch (an IPC stream after the magic); at close the end-of-stream marker and the
 * footer, after which any Arrow reader opens it as a file.
 * File schema: record handlers write columns `tuple_id: int64`, `tsc: int64`; counter handlers write
 * `period_start_tsc: int64`, `count: int64` (TSCs stay below 2^63 for decades of uptime). Schema metadata (all
 * values UTF-8 strings):
 *   cloudprofiler.version, channel.name, channel.number, handler, handler.params (JSON array; a ReT key is left
 *   out), host, pid, boot_id, tsc.invariant ("true"/"false"), tsc.hz, tsc.hz_uncertainty, tsc.hz_source
 *   ("cpuid-0x15"/"calibrated"), tsc.simulation ("null" or JSON {offset, skew_ppm, invariant}), tsc.read
 *   ("ordered"/"unordered"), compression ("none"/"zstd"), open.clock (JSON {tsc, monotonic_raw_ns, realtime_ns,
 *   uncertainty_ticks}), close.clock (same, "null" until closed), records.logged, records.written,
 *   records.dropped, closed ("true"/"false"), plus the caller's own keys from cp_channel_open() (at most 64);
 *   the "<name>.ack" channel of a ret_start channel adds ret.start_channel (that channel's name) and ret.port.
 * In the schema message the values that change (handler.params, close.clock, counts, closed) are padded with
 * spaces to a fixed width and rewritten in place at every flush and at close, so a file cut short by SIGKILL
 * still says what it held at its last flush. The footer's schema carries the final values without padding.
 *
 * Segments: a channel's file rolls into a new one when it has passed cp_options.roll_bytes (64 MiB by default),
 * so that the files of a process that runs for days end (and get their footer) one after the other and none grows
 * without bound. The new file, the channel's next segment, takes the next channel number; the old one closes
 * about a second later, as at a switch of rules (see Rules, below: nothing is lost or doubled, every file counts
 * what it holds). The file in which a batch passes the size ends with it: a segment holds up to roll_bytes plus
 * one batch. Every segment adds to its metadata switch.reason ("open" for the first, "roll", "rules"), switch.in
 * and switch.out (see Rules). ret_start and ret_end channels, and the ".ack" channel, never roll.
 *
 * Handles: a cp_channel pointer stays valid until the process ends (its memory is kept when it closes), so
 * logging to a closed channel is a counted no-op; NULL is also a counted no-op. */

typedef struct cp_channel cp_channel;

typedef enum cp_handler {
  CP_HANDLER_NULL = 0,       /* discard */
  CP_HANDLER_IDENTITY = 1,   /* every record; the calling thread writes each batch of 1024 to the file */
  CP_HANDLER_BUFFERED = 2,   /* every record; blocks -> compression threads -> IO thread */
  CP_HANDLER_SPC = 3,        /* periodic counter, single writer; params: period_ns */
  CP_HANDLER_MPC = 4,        /* periodic counter, any number of writers; params: period_ns */
  CP_HANDLER_DOWNSAMPLE = 5, /* every n-th call (calls 0, n, 2n, ...); params: n >= 1 */
  CP_HANDLER_XOY = 6,        /* records whose tuple_id mod y < x; params: x, y with 0 <= x <= y, y >= 1 */
  CP_HANDLER_FIRSTLAST = 7,  /* the records with the smallest and the largest TSC, written at close */
  CP_HANDLER_RET_START = 8,  /* return-trip start: buffered, plus acks logged at arrival; params: port, key */
  CP_HANDLER_RET_END = 9,    /* return-trip end: buffered, plus an ack to the start node; params: IPv4, port, key */
  CP_HANDLER_COUNT_ = 10
} cp_handler;

/* Lower-case names: "null", "identity", "buffered", "spc", "mpc", "downsample", "xoy", "firstlast",
 * "ret_start", "ret_end". */
CP_EXPORT const char *cp_handler_name(cp_handler handler);
CP_EXPORT int cp_handler_from_name(const char *name, cp_handler *out, cp_error *error);
/* Number of parameters the handler takes (cp_channel_open requires exactly that many). */
CP_EXPORT int cp_handler_param_count(cp_handler handler);
/* The check cp_channel_open makes of its handler and parameters, without opening anything: 0, or EINVAL with a
 * message naming the bad value (a wrong number of parameters, a parameter out of range). Lets a configuration be
 * checked where it is read, before the processes that open channels from it start. */
CP_EXPORT int cp_handler_check(cp_handler handler, const int64_t *params, size_t n_params, cp_error *error);

/* Opens a channel; NULL on error. `meta_keys`/`meta_values` (n_meta pairs, may be 0) go into the file's
 * schema metadata. Fails with EINVAL for an unknown handler, a wrong number of parameters or a parameter out
 * of range, and with the errno of the file system when the file cannot be created. */
CP_EXPORT cp_channel *cp_channel_open(const char *name, cp_handler handler, const int64_t *params, size_t n_params,
                                      const char *const *meta_keys, const char *const *meta_values, size_t n_meta,
                                      cp_error *error);

/* Hot path: read the TSC and hand (tuple_id, tsc) to the channel's handler. Lock-free, any thread. */
CP_EXPORT void cp_log(cp_channel *channel, int64_t tuple_id);
/* One TSC read per record, one call for the whole array. */
CP_EXPORT void cp_log_many(cp_channel *channel, const int64_t *tuple_ids, size_t n);
/* One TSC read for the whole array, which every record takes: records that pass the point together, as a batch
 * (an Arrow batch in a Python worker), without the TSC read per record (16-25 ns on a VM) saying only how far the
 * loop had come. */
CP_EXPORT void cp_log_batch(cp_channel *channel, const int64_t *tuple_ids, size_t n);
/* A record whose TSC the caller read earlier with cp_tsc(), handled as cp_log would have handled it then: for
 * events that happen before their channel can open (a Spark task that starts while the executor's library is
 * still starting). */
CP_EXPORT void cp_log_at(cp_channel *channel, int64_t tuple_id, uint64_t tsc);
/* cp_log_at for arrays: record i is (tuple_ids[i], tscs[i]). */
CP_EXPORT void cp_log_many_at(cp_channel *channel, const int64_t *tuple_ids, const uint64_t *tscs, size_t n);

/* Change parameter `index` of the handler (same ranges as at open). */
CP_EXPORT int cp_channel_parameterize(cp_channel *channel, uint32_t index, int64_t value, cp_error *error);
/* Every record logged to this channel before the call is in the file when it returns. */
CP_EXPORT int cp_channel_flush(cp_channel *channel, cp_error *error);
/* Flush, write the final metadata, close the file. A second close returns EBADF. */
CP_EXPORT int cp_channel_close(cp_channel *channel, cp_error *error);

typedef struct cp_channel_stats {
  uint64_t logged;      /* cp_log calls (and records of cp_log_many) while open */
  uint64_t kept;        /* records the handler kept (counter handlers: periods) */
  uint64_t written;     /* records (or periods) in the file */
  uint64_t dropped;     /* records lost to CP_FULL_DROP or to a write that failed */
  uint64_t after_close; /* logs to this channel after it closed (counted no-ops) */
  uint64_t bytes_written;
} cp_channel_stats;

CP_EXPORT int cp_channel_stats_get(const cp_channel *channel, cp_channel_stats *out, cp_error *error);
/* The handler the channel logs with now: that of its current segment. */
CP_EXPORT cp_handler cp_channel_handler(const cp_channel *channel);
/* The path of the channel's current segment's file; lives as long as the channel handle. */
CP_EXPORT const char *cp_channel_path(const cp_channel *channel);

typedef struct cp_library_stats {
  uint64_t channels_opened;
  uint64_t channels_open;
  uint64_t null_handle_logs;  /* logs to a NULL handle */
  uint64_t dropped;           /* sum over channels */
  uint64_t bytes_written;     /* sum over channels */
  uint64_t logged;            /* sum over channels (a hand-off channel's records count as its owner takes them) */
  uint64_t sample_scanned;    /* records the samples' scan read (cp_channel_samples_take) */
  uint64_t sample_scan_ticks; /* the time it took, in TSC ticks (the compression threads', off the logging path) */
} cp_library_stats;

CP_EXPORT void cp_library_stats_get(cp_library_stats *out);

typedef struct cp_channel_count {
  const char *name; /* the channel's name; lives until the process ends, as the channel's memory */
  uint64_t logged;  /* as cp_channel_stats_get gives them */
  uint64_t dropped;
} cp_channel_count;

/* Every channel this process opened, open or closed (one opened by rules once, over all its segments; a hand-off
 * channel as its owner's), newest first, into out[0..cap); returns how many there are (as cp_rules_get: call again
 * with a larger array when that is more than cap). For live figures per channel (records per second). */
CP_EXPORT size_t cp_channel_counts(cp_channel_count *out, size_t cap);

/* Samples of the records, the same ids on every channel and in every process, so that a collector (the Spark
 * driver) can pair the records of one id on two channels (a hop's latency) without reading the files.
 *
 * An id's level is the number of trailing zero bits of splitmix64(id) (cp_sample_level): the ids of level >= L are
 * a fixed 2^-L of all ids, whichever channel or process sees them. Every channel of records (tuple id, TSC: every
 * handler but spc, mpc and null; a hand-off channel's records are its owner's channel's, each segment of a handle a
 * channel of its own) keeps, as its records go to its file (the compression threads, or the batch write of
 * identity and firstlast; a record that a failed write then drops is kept too), those whose level is >= the
 * channel's level, at most CP_SAMPLES_PER_CHANNEL of them since the last take. When one more comes and the channel
 * holds that many, its level rises by one and the kept samples below it go (again while it still holds that many):
 * a channel holds exactly its records since the last take whose level is >= its level now. A channel's level starts
 * at 0 and never goes down (it passes 64, keeping nothing more, only when the one id of level 64 fills a channel's
 * samples alone: that id logged CP_SAMPLES_PER_CHANNEL + 1 times since a take). The logging threads do none of this
 * (the hot path is unchanged); it costs the thread that encodes the rows a hash and a compare per row. A channel's
 * samples (4 KiB, allocated at its first) are freed once it has closed and they have been taken. */
#define CP_SAMPLES_PER_CHANNEL 256

typedef struct cp_channel_sample {
  const char *name; /* the channel's name; lives until the process ends, as the channel's memory */
  int64_t id;
  uint64_t tsc;
  uint32_t level; /* the channel's level as the sample was taken */
} cp_channel_sample;

/* An id's sampling level: the trailing zero bits of splitmix64 of it (64 when that is 0). */
CP_EXPORT uint32_t cp_sample_level(int64_t id);
/* Moves the samples every channel of this process holds (open or closed; a segment's under its handle's name)
 * into out[0..cap) and returns how many it wrote; each channel starts again from none, at the level it has. What
 * does not fit stays with its channel for the next take. For live hop latencies (a collection every few seconds). */
CP_EXPORT size_t cp_channel_samples_take(cp_channel_sample *out, size_t cap);

/* ==== Rules: a channel's handler chosen by its name, changed while it runs ================================
 * Rules map channel names to handlers, one rule a line:
 *   <pattern>=<handler>[:<param>[:<param>...]]      e.g.  ysb.*=downsample:64   *=buffered
 * The pattern is a shell glob (fnmatch(3): *, ?, [...]; '*' also matches dots). The first rule whose pattern
 * matches a channel's name wins; a name no rule matches gets buffered. Blank lines and lines starting with '#' are
 * skipped; spaces around the parts are ignored. ret_start and ret_end are refused (they need a peer of their own).
 *
 * cp_rules_set checks every rule before it applies any: an unknown handler, a wrong number of parameters or one
 * out of range (cp_handler_check), a malformed pattern or line is refused with EINVAL and a message naming the
 * rule (its line number and text); the rules in force stay. At most CP_RULES_MAX rules.
 *
 * A channel opened by rules (cp_channel_open_by_rules) is a handle over a series of files, its segments. When
 * new rules give it another handler or other parameters, it switches at once: the next segment opens (a new file,
 * the next channel number) and later calls log to it; the calls of every thread go on meanwhile (cp_log reads the
 * channel's current segment with one atomic load). The previous segment closes about a second later, when no
 * call that started before the switch can still be logging to it; nothing logged to it is lost. A segment's
 * schema metadata adds:
 *   rules.rule       the rule that chose its handler, e.g. "ysb.*=downsample:64" ("*=buffered" for no match)
 *   rules.segment    0 for the channel's first file, then 1, 2, ...
 *   switch.previous  the handler and parameters of the segment before, e.g. "buffered" ("" for segment 0)
 *   switch.reason    "open" for segment 0, "rules" for a switch of handler, "roll" for a roll (see Channels)
 *   switch.in        the clock (as open.clock) of the switch that opened it: its records were taken after it;
 *                    "null" for segment 0
 *   switch.out       the clock of the switch that ended it: calls after it log to the next segment; "null"
 *                    while it is current. A call under way at that moment may still land here; a counter's last
 *                    period starts before it and runs on to the close, so that it holds those calls too.
 * The handle works with every channel function: flush, close and stats cover all its segments (cp_stop closes it
 * like any channel), the path and cp_channel_handler are the current segment's, cp_channel_parameterize changes
 * the current segment (until the next switch). Segment memory is kept (a few hundred bytes each, plus a writer per
 * logging thread; the blocks are freed after the close) until the process ends, like every channel's.
 *
 * A process follows a rules file when the environment variable CLOUDPROFILER_RULES names one: it is read when the
 * library starts and again after every change (its modification time, size or inode), once the file has stayed
 * the same for 100 ms (a file caught half-written is not applied): within about 0.2 s. A file that cannot
 * be read or holds a bad rule is refused with one message on stderr naming it; the rules in force stay. */
#define CP_RULES_MAX 256

/* Replaces the rules in force and switches every open channel opened by rules whose handler or parameters
 * change. A channel that cannot switch (its new file cannot be created) keeps its segment, reported on stderr. */
CP_EXPORT int cp_rules_set(const char *text, cp_error *error);
/* The checks of cp_rules_set without applying anything: 0, or EINVAL naming the first bad rule. For tools that
 * check rules where they are given (a command line, a configuration helper); the rules in force stay. */
CP_EXPORT int cp_rules_check(const char *text, cp_error *error);
/* The rules in force, one a line as cp_rules_set took them (comments and blank lines left out), into out[0..cap)
 * NUL-terminated; returns the length of the whole text (as snprintf: call again with a larger buffer when it is
 * >= cap). */
CP_EXPORT size_t cp_rules_get(char *out, size_t cap);
/* Opens a channel whose handler the rules in force choose; NULL on error (as cp_channel_open, with at most 58
 * metadata pairs of the caller's: each segment adds 6). */
CP_EXPORT cp_channel *cp_channel_open_by_rules(const char *name, const char *const *meta_keys,
                                               const char *const *meta_values, size_t n_meta, cp_error *error);

/* ==== Return-trip (ReT) handlers: the paper's baseline ====================================================
 * ret_start (params: UDP port to listen on, 0 = any free port; key) logs like buffered and opens the companion
 * channel "<name>.ack", where each acknowledgement is logged (tuple id, TSC of its arrival, read before the
 * datagram is checked). ret_end (params: the start node's IPv4 address as a host-order integer, its port; key)
 * logs like buffered and sends each tuple id to the start node. A duration from start to end is then bounded on
 * the start node's clock alone by [0, ack arrival - start].
 *
 * key: a shared 64-bit secret (0: none). With a key, every acknowledgement carries the keyed tag of the probes
 * (below), and the start node accepts only acknowledgements tagged with its own key. Datagrams of the wrong
 * size, magic or tag are counted as rejected; datagrams the kernel dropped because the receive buffer was full
 * are counted as overflows (the kernel reports them with the next datagram that arrives); sends that fail
 * (unreachable node, full socket buffer) are counted, never retried. ret_end's socket closes one second after
 * its channel, when no racing cp_log can still use it. */
typedef struct cp_ret_info {
  uint16_t port;           /* ret_start: the port it listens on */
  cp_channel *ack_channel; /* ret_start: the "<name>.ack" channel */
  uint64_t rejected;       /* ret_start: datagrams that were not acknowledgements of this key */
  uint64_t send_failures;  /* ret_end: acknowledgements that could not be sent */
  uint64_t overflows;      /* ret_start: acknowledgements the kernel dropped (full receive buffer) */
} cp_ret_info;

CP_EXPORT int cp_ret_info_get(const cp_channel *channel, cp_ret_info *out, cp_error *error);

/* ==== Calibration probes (MinRTT) =========================================================================
 * A responder answers UDP probes with its TSC; a prober sends probes to a responder and records, for each,
 * (local send TSC, remote TSC, local receive TSC). The MinRTT method and the error bounds are computed from
 * these records by the analysis (python/cloudprofiler/calibration).
 *
 * With a secret (1 to 64 bytes, shared by responder and prober), every packet carries a tag: HMAC-SHA256 of the
 * packet's other bytes under the secret, its first CP_PROBE_TAG_BYTES bytes. A responder answers only requests
 * tagged with its secret and a prober takes only answers so tagged, to its own random nonce: without the secret
 * no one can forge a probe or an answer, even after reading every packet (a request sent again is answered
 * again, and its prober, done with that nonce, takes no such answer). An empty secret turns the check off (tests
 * and trusted networks only). Packets of the wrong size, magic or tag are counted as rejected.
 *
 * CLOUDPROFILER_RESPONDER_DELAY_US="<before>,<after>" (a test feature, off by default) makes a responder wait
 * that many microseconds before reading its TSC and after, to build asymmetric paths. */

#define CP_PROBE_TAG_BYTES 16

typedef struct cp_responder cp_responder;

/* Binds address:port (port 0 = any free port) and answers probes on a thread of its own until stopped. The thread
 * sleeps in a blocking receive while idle and polls for 2 ms after each answer, the next probe of a run. */
CP_EXPORT int cp_responder_start(const char *address, uint16_t port, const uint8_t *secret, size_t secret_len,
                                 cp_responder **out, cp_error *error);
CP_EXPORT uint16_t cp_responder_port(const cp_responder *responder);
CP_EXPORT void cp_responder_counts(const cp_responder *responder, uint64_t *answered, uint64_t *rejected);
/* Stops the thread, closes the socket and frees the responder. */
CP_EXPORT void cp_responder_stop(cp_responder *responder);

typedef struct cp_probe {
  uint64_t send_tsc;   /* local TSC before sending */
  uint64_t remote_tsc; /* the responder's TSC */
  uint64_t recv_tsc;   /* local TSC after receiving the answer; 0 when the probe went unanswered */
  uint32_t remote_cpu;
  uint32_t local_cpu;
} cp_probe;

/* Sends `count` probes one after another to address:port, waiting up to timeout_ms for each answer (spinning
 * on a non-blocking socket when `spin` is set, which tightens the round trip, for at most 4 times the call's smallest
 * round trip so far, 50 to 200 us, then asleep: a later answer was delayed anyway). Fills out[0..count) and
 * *answered; unanswered and unsent probes have recv_tsc 0. A peer that goes away ends the run early: at once when
 * its port is refused (nothing listens there any more), else after CP_PROBE_LOSSES_MAX unanswered probes in a
 * row, so that it costs at most that many timeouts instead of count. Fails, naming the peer, when no probe is
 * answered: ECONNREFUSED or ETIMEDOUT. */
#define CP_PROBE_LOSSES_MAX 8
CP_EXPORT int cp_probe_peer(const char *address, uint16_t port, const uint8_t *secret, size_t secret_len,
                            uint32_t count, uint32_t timeout_ms, int spin, cp_probe *out, uint32_t *answered,
                            cp_error *error);

/* ==== Hand-off: channels whose records another process's library writes =================================
 * An owner process (a Spark executor) calls cp_inbox_start(dir); a process of the same host (one of its Python
 * workers) then opens a hand-off channel in that folder. The writer starts no thread and writes no file of its
 * own: its channel is CP_HANDOFF_BLOCKS blocks of CP_HANDOFF_BLOCK_RECORDS (tuple id, TSC) records in shared
 * memory (a memfd sealed against shrinking, which it names in the folder), which it fills in turn, each record
 * published as it is written (one count store for each run of records a call writes; no lock between the
 * processes).
 * The owner's inbox thread takes the records into a channel of its own: the writer's name, handler (or the owner's
 * rules) and metadata, plus "handoff.pid"; its compression and IO threads write them into its files. A buffered
 * channel's full block goes to the compression threads as it lies in the shared memory (no copy in the owner), and
 * is freed for reuse once encoded; a block still filling is taken when the writer closes, dies or flushes, or after
 * the owner's flush interval. Other handlers take the records as they are published (within milliseconds), with
 * their TSCs (cp_log_many_at). A writer that dies loses nothing it published. A writer that finds its next block still
 * full waits up to CP_HANDOFF_WAIT_MS for the owner, then drops and counts what it cannot publish until a block is free
 * again; the owner adds those drops to its channel's. Spark's counters and downsampling count a record when the
 * owner takes it. */
#define CP_HANDOFF_BLOCKS 8
#define CP_HANDOFF_BLOCK_RECORDS 32768
#define CP_HANDOFF_WAIT_MS 1000

/* Starts taking the hand-off channels opened in `dir` (created if missing; the library starts with defaults if it
 * has not). One inbox per process; cp_stop takes what is published, closes their channels and removes the folder's
 * files. EALREADY when an inbox runs. */
CP_EXPORT int cp_inbox_start(const char *dir, cp_error *error);
/* The folder of the running inbox, or NULL. */
CP_EXPORT const char *cp_inbox_dir(void);

typedef struct cp_handoff cp_handoff;

/* Opens a hand-off channel in the inbox `dir`: `handler` NULL for the one the owner's rules choose by name, else
 * that handler and its parameters (checked as cp_channel_open checks them). Returns once the owner has mapped the
 * memory (within a millisecond or so). Fails with ENOENT when no live owner runs an inbox there (the caller logs on
 * its own then), ENOSPC when the shared memory cannot be reserved, ECONNREFUSED when the owner refused the channel
 * (its log says why), ETIMEDOUT when it did not map it within CP_HANDOFF_WAIT_MS, EINVAL for bad arguments (at most
 * CP_HANDOFF_META_MAX metadata pairs, CP_HANDOFF_TEXT_MAX bytes of name and metadata). */
#define CP_HANDOFF_META_MAX 32
#define CP_HANDOFF_TEXT_MAX 16384
CP_EXPORT cp_handoff *cp_handoff_open(const char *dir, const char *name, const cp_handler *handler,
                                      const int64_t *params, size_t n_params, const char *const *meta_keys,
                                      const char *const *meta_values, size_t n_meta, cp_error *error);
/* Reads the TSC and publishes (tuple_id, tsc). Any thread of the writer (a mutex of the process orders them). */
CP_EXPORT void cp_handoff_log(cp_handoff *handoff, int64_t tuple_id);
CP_EXPORT void cp_handoff_log_many(cp_handoff *handoff, const int64_t *tuple_ids, size_t n);
/* cp_log_batch for a hand-off channel: one TSC, read once, for every record of the array. */
CP_EXPORT void cp_handoff_log_batch(cp_handoff *handoff, const int64_t *tuple_ids, size_t n);
/* Waits until the owner has taken every record published before the call: ETIMEDOUT after timeout_ms. */
CP_EXPORT int cp_handoff_flush(cp_handoff *handoff, uint32_t timeout_ms, cp_error *error);

typedef struct cp_handoff_stats {
  uint64_t logged;  /* records published */
  uint64_t taken;   /* of them, taken by the owner so far */
  uint64_t dropped; /* records that found no free block */
} cp_handoff_stats;
CP_EXPORT void cp_handoff_stats_get(const cp_handoff *handoff, cp_handoff_stats *out);
/* The file in the inbox folder that names the shared memory: it holds "/proc/<pid>/fd/<fd>" (removed by the owner
 * once it has taken everything). */
CP_EXPORT const char *cp_handoff_path(const cp_handoff *handoff);
/* Marks the channel done, for the owner to take its last records and close its own channel, and frees the handle
 * (no call may use it after). Does not wait for the owner. */
CP_EXPORT void cp_handoff_close(cp_handoff *handoff);

#ifdef __cplusplus
}
#endif

#endif /* CLOUDPROFILER_H */
