/* cffi declarations of native/include/cloudprofiler.h (core sections). */
#define CP_VERSION_NUMBER ...

int cp_version(void);
const char *cp_version_string(void);

typedef struct cp_error { int code; char message[512]; } cp_error;

uint64_t cp_tsc(void);
uint64_t cp_tscp(uint32_t *cpu_id);
typedef struct cp_clock_reading {
  uint64_t tsc; int64_t monotonic_raw_ns; int64_t realtime_ns; uint64_t uncertainty_ticks; uint32_t cpu_id;
} cp_clock_reading;
int cp_clock_read(cp_clock_reading *out, cp_error *error);
int cp_tsc_is_invariant(void);
const char *cp_tsc_simulation(void);
int cp_require_invariant_tsc(int force, cp_error *error);
typedef enum cp_frequency_source { CP_FREQUENCY_CPUID = 1, CP_FREQUENCY_CALIBRATED = 2 } cp_frequency_source;
typedef struct cp_tsc_frequency { double hz; double uncertainty_hz; cp_frequency_source source; } cp_tsc_frequency;
int cp_tsc_frequency_get(cp_tsc_frequency *out, cp_error *error);

typedef enum cp_compression { CP_COMPRESSION_NONE = 0, CP_COMPRESSION_ZSTD = 1 } cp_compression;
typedef enum cp_full_policy { CP_FULL_BLOCK = 0, CP_FULL_DROP = 1 } cp_full_policy;
typedef enum cp_tsc_read { CP_TSC_ORDERED = 0, CP_TSC_UNORDERED = 1 } cp_tsc_read;
typedef struct cp_options {
  const char *log_dir; uint32_t block_records; uint32_t channel_blocks; uint32_t compression_threads;
  cp_compression compression; int zstd_level; cp_full_policy full_policy; uint32_t flush_interval_ms;
  cp_tsc_read tsc_read; int64_t roll_bytes;
} cp_options;
#define CP_ROLL_BYTES_DEFAULT ...
void cp_options_init(cp_options *options);
int cp_start(const cp_options *options, cp_error *error);
const char *cp_log_dir(void);
int cp_flush_all(cp_error *error);
int cp_stop(void);

typedef struct cp_channel cp_channel;
typedef enum cp_handler {
  CP_HANDLER_NULL = 0, CP_HANDLER_IDENTITY = 1, CP_HANDLER_BUFFERED = 2, CP_HANDLER_SPC = 3, CP_HANDLER_MPC = 4,
  CP_HANDLER_DOWNSAMPLE = 5, CP_HANDLER_XOY = 6, CP_HANDLER_FIRSTLAST = 7, CP_HANDLER_RET_START = 8,
  CP_HANDLER_RET_END = 9, CP_HANDLER_COUNT_ = 10
} cp_handler;
const char *cp_handler_name(cp_handler handler);
int cp_handler_from_name(const char *name, cp_handler *out, cp_error *error);
int cp_handler_param_count(cp_handler handler);
int cp_handler_check(cp_handler handler, const int64_t *params, size_t n_params, cp_error *error);
cp_channel *cp_channel_open(const char *name, cp_handler handler, const int64_t *params, size_t n_params,
                            const char *const *meta_keys, const char *const *meta_values, size_t n_meta,
                            cp_error *error);
void cp_log(cp_channel *channel, int64_t tuple_id);
void cp_log_many(cp_channel *channel, const int64_t *tuple_ids, size_t n);
void cp_log_batch(cp_channel *channel, const int64_t *tuple_ids, size_t n);
void cp_log_at(cp_channel *channel, int64_t tuple_id, uint64_t tsc);
void cp_log_many_at(cp_channel *channel, const int64_t *tuple_ids, const uint64_t *tscs, size_t n);
int cp_channel_parameterize(cp_channel *channel, uint32_t index, int64_t value, cp_error *error);
int cp_channel_flush(cp_channel *channel, cp_error *error);
int cp_channel_close(cp_channel *channel, cp_error *error);
typedef struct cp_channel_stats {
  uint64_t logged; uint64_t kept; uint64_t written; uint64_t dropped; uint64_t after_close; uint64_t bytes_written;
} cp_channel_stats;
int cp_channel_stats_get(const cp_channel *channel, cp_channel_stats *out, cp_error *error);
cp_handler cp_channel_handler(const cp_channel *channel);
const char *cp_channel_path(const cp_channel *channel);
#define CP_RULES_MAX 256
int cp_rules_set(const char *text, cp_error *error);
int cp_rules_check(const char *text, cp_error *error);
size_t cp_rules_get(char *out, size_t cap);
cp_channel *cp_channel_open_by_rules(const char *name, const char *const *meta_keys, const char *const *meta_values,
                                     size_t n_meta, cp_error *error);
typedef struct cp_library_stats {
  uint64_t channels_opened; uint64_t channels_open; uint64_t null_handle_logs; uint64_t dropped; uint64_t bytes_written;
  uint64_t logged; uint64_t sample_scanned; uint64_t sample_scan_ticks;
} cp_library_stats;
void cp_library_stats_get(cp_library_stats *out);
typedef struct cp_channel_count {
  const char *name; uint64_t logged; uint64_t dropped;
} cp_channel_count;
size_t cp_channel_counts(cp_channel_count *out, size_t cap);
#define CP_SAMPLES_PER_CHANNEL ...
typedef struct cp_channel_sample {
  const char *name; int64_t id; uint64_t tsc; uint32_t level;
} cp_channel_sample;
uint32_t cp_sample_level(int64_t id);
size_t cp_channel_samples_take(cp_channel_sample *out, size_t cap);
typedef struct cp_ret_info {
  uint16_t port;
  cp_channel *ack_channel;
  uint64_t rejected;
  uint64_t send_failures;
  uint64_t overflows;
} cp_ret_info;
int cp_ret_info_get(const cp_channel *channel, cp_ret_info *out, cp_error *error);

#define CP_HANDOFF_BLOCKS ...
#define CP_HANDOFF_BLOCK_RECORDS ...
#define CP_HANDOFF_WAIT_MS ...
#define CP_HANDOFF_META_MAX ...
int cp_inbox_start(const char *dir, cp_error *error);
const char *cp_inbox_dir(void);
typedef struct cp_handoff cp_handoff;
cp_handoff *cp_handoff_open(const char *dir, const char *name, const cp_handler *handler, const int64_t *params,
                            size_t n_params, const char *const *meta_keys, const char *const *meta_values,
                            size_t n_meta, cp_error *error);
void cp_handoff_log(cp_handoff *handoff, int64_t tuple_id);
void cp_handoff_log_many(cp_handoff *handoff, const int64_t *tuple_ids, size_t n);
void cp_handoff_log_batch(cp_handoff *handoff, const int64_t *tuple_ids, size_t n);
int cp_handoff_flush(cp_handoff *handoff, uint32_t timeout_ms, cp_error *error);
typedef struct cp_handoff_stats { uint64_t logged; uint64_t taken; uint64_t dropped; } cp_handoff_stats;
void cp_handoff_stats_get(const cp_handoff *handoff, cp_handoff_stats *out);
const char *cp_handoff_path(const cp_handoff *handoff);
void cp_handoff_close(cp_handoff *handoff);
