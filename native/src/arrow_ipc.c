/* Arrow IPC file format pieces (schema and record batch messages, the footer) written without a flatbuffers
 * dependency.
 *
 * The builder lays objects out front to back: a parent is written with placeholder offsets, its children
 * after it, and the offsets patched (flatbuffers offsets must point forward). The layout depends only on the
 * lengths of the strings, which lets a channel rewrite its schema message in place when values of equal
 * length change. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "internal.h"

const uint8_t cp__ipc_eos[8] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
const uint8_t cp__ipc_magic[8] = {'A', 'R', 'R', 'O', 'W', '1', 0, 0};

enum { MESSAGE_SCHEMA = 1, MESSAGE_RECORD_BATCH = 3, METADATA_V5 = 4, TYPE_INT = 2, CODEC_ZSTD = 1 };

void cp__buf_free(cp_buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

/* Makes room for `extra` more bytes after b->len without touching them. */
static bool buf_grow(cp_buf *b, size_t extra) {
  if (b->failed) return false;
  if (b->len + extra <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 1024;
  while (cap < b->len + extra) cap *= 2;
  uint8_t *data = realloc(b->data, cap);
  if (!data) {
    b->failed = true;
    return false;
  }
  b->data = data;
  b->cap = cap;
  return true;
}

/* Appends `size` zeroed bytes at the next multiple of `align` (the padding zeroed too); returns their
 * position (0 after a failure, which every put_ checks). */
static size_t buf_reserve(cp_buf *b, size_t size, size_t align) {
  size_t pos = (b->len + align - 1) & ~(align - 1);
  if (!buf_grow(b, pos + size - b->len)) return 0;
  if (pos + size > b->len) memset(b->data + b->len, 0, pos + size - b->len);
  b->len = pos + size;
  return pos;
}

static void put_u8(cp_buf *b, size_t pos, uint8_t v) {
  if (!b->failed) b->data[pos] = v;
}
static void put_u16(cp_buf *b, size_t pos, uint16_t v) {
  if (!b->failed) memcpy(b->data + pos, &v, 2);
}
static void put_u32(cp_buf *b, size_t pos, uint32_t v) {
  if (!b->failed) memcpy(b->data + pos, &v, 4);
}
static void put_i64(cp_buf *b, size_t pos, int64_t v) {
  if (!b->failed) memcpy(b->data + pos, &v, 8);
}

/* uoffset at `field` pointing at `target` (target > field). */
static void link(cp_buf *b, size_t field, size_t target) { put_u32(b, field, (uint32_t)(target - field)); }

/* A table with the given field sizes (0 = absent); returns the table position and each field's position. */
static size_t table(cp_buf *b, int n, const uint8_t *sizes, size_t *pos) {
  size_t vt = buf_reserve(b, 4 + 2 * (size_t)n, 2);
  uint16_t offsets[16] = {0};
  size_t off = 4;
  for (int i = 0; i < n; i++) {
    if (!sizes[i]) continue;
    off = (off + sizes[i] - 1) & ~(size_t)(sizes[i] - 1);
    offsets[i] = (uint16_t)off;
    off += sizes[i];
  }
  size_t t = buf_reserve(b, off, 8);
  put_u16(b, vt, (uint16_t)(4 + 2 * n));
  put_u16(b, vt + 2, (uint16_t)off);
  for (int i = 0; i < n; i++) {
    put_u16(b, vt + 4 + 2 * (size_t)i, offsets[i]);
    pos[i] = offsets[i] ? t + offsets[i] : 0;
  }
  put_u32(b, t, (uint32_t)(t - vt));
  return t;
}

/* A vector of `count` elements of `size` bytes aligned to `align`; returns the position of element 0. */
static size_t vector(cp_buf *b, size_t field, uint32_t count, size_t size, size_t align) {
  size_t len_pos = (b->len + 3) & ~(size_t)3;
  if ((len_pos + 4) % align) len_pos += align - (len_pos + 4) % align;
  buf_reserve(b, len_pos + 4 - b->len, 1);
  put_u32(b, len_pos, count);
  link(b, field, len_pos);
  return buf_reserve(b, count * size, 1);
}

static void string(cp_buf *b, size_t field, const char *s) {
  size_t n = strlen(s);
  size_t pos = buf_reserve(b, 4 + n + 1, 4);
  put_u32(b, pos, (uint32_t)n);
  if (!b->failed) memcpy(b->data + pos + 4, s, n);
  link(b, field, pos);
}

/* Message header: root offset, Message table; returns the position of the header field to link. */
static size_t message(cp_buf *b, uint8_t header_type, int64_t body_length) {
  size_t root = buf_reserve(b, 4, 4);
  static const uint8_t sizes[4] = {2, 1, 4, 8};
  size_t f[4];
  size_t t = table(b, 4, sizes, f);
  link(b, root, t);
  put_u16(b, f[0], METADATA_V5);
  put_u8(b, f[1], header_type);
  put_i64(b, f[3], body_length);
  return f[2];
}

/* A non-nullable signed 64-bit integer field (signed so that SQL engines and Spark, which have no unsigned
 * types, subtract TSCs without overflow: a TSC stays below 2^63 for centuries). */
static void int_field(cp_buf *b, size_t slot, const char *name) {
  static const uint8_t sizes[6] = {4, 1, 1, 4, 0, 4};
  size_t f[6];
  size_t t = table(b, 6, sizes, f);
  link(b, slot, t);
  put_u8(b, f[2], TYPE_INT);
  string(b, f[0], name);
  static const uint8_t int_sizes[2] = {4, 1};
  size_t g[2];
  size_t it = table(b, 2, int_sizes, g);
  link(b, f[3], it);
  put_u32(b, g[0], 64);
  put_u8(b, g[1], 1);
  vector(b, f[5], 0, 4, 4);
}

/* Wraps the flatbuffer in b (starting at offset 8) as an encapsulated message: marker, length, padding. */
static void frame(cp_buf *b) {
  buf_reserve(b, 0, 8);
  put_u32(b, 0, 0xffffffffu);
  put_u32(b, 4, (uint32_t)(b->len - 8));
}

/* A Schema table linked from `slot`: the channel's two int64 columns and the metadata pairs. */
static void schema(cp_buf *b, size_t slot, int record_kind, const char *const *keys, const char *const *values,
                   size_t n) {
  static const uint8_t sizes[3] = {0, 4, 4};
  size_t f[3];
  size_t t = table(b, 3, sizes, f);
  link(b, slot, t);
  size_t fields = vector(b, f[1], 2, 4, 4);
  size_t kv = vector(b, f[2], (uint32_t)n, 4, 4);
  int_field(b, fields, record_kind ? "period_start_tsc" : "tuple_id");
  int_field(b, fields + 4, record_kind ? "count" : "tsc");
  for (size_t i = 0; i < n; i++) {
    static const uint8_t kv_sizes[2] = {4, 4};
    size_t g[2];
    size_t t = table(b, 2, kv_sizes, g);
    link(b, kv + 4 * i, t);
    string(b, g[0], keys[i]);
    string(b, g[1], values[i]);
  }
}

int cp__ipc_schema(cp_buf *b, int record_kind, const char *const *keys, const char *const *values, size_t n) {
  b->len = 0;
  b->failed = false;
  buf_reserve(b, 8, 8);
  schema(b, message(b, MESSAGE_SCHEMA, 0), record_kind, keys, values, n);
  frame(b);
  return b->failed ? ENOMEM : 0;
}

int cp__ipc_file_end(cp_buf *b, int record_kind, const char *const *keys, const char *const *values, size_t n,
                     const cp_ipc_block *blocks, size_t n_blocks) {
  b->len = 0;
  b->failed = false;
  size_t eos = buf_reserve(b, sizeof cp__ipc_eos, 8);
  if (!b->failed) memcpy(b->data + eos, cp__ipc_eos, sizeof cp__ipc_eos);
  size_t start = b->len; /* 8-aligned, so the footer's own alignment holds relative to its first byte */
  size_t root = buf_reserve(b, 4, 4);
  static const uint8_t sizes[4] = {2, 4, 4, 4};
  size_t f[4];
  size_t footer = table(b, 4, sizes, f);
  link(b, root, footer);
  put_u16(b, f[0], METADATA_V5);
  schema(b, f[1], record_kind, keys, values, n);
  vector(b, f[2], 0, sizeof(cp_ipc_block), 8); /* no dictionaries */
  size_t pos = vector(b, f[3], (uint32_t)n_blocks, sizeof(cp_ipc_block), 8);
  if (!b->failed && n_blocks) memcpy(b->data + pos, blocks, n_blocks * sizeof(cp_ipc_block));
  uint32_t footer_len = (uint32_t)(b->len - start);
  size_t tail = buf_reserve(b, 4 + 6, 1);
  put_u32(b, tail, footer_len);
  if (!b->failed) memcpy(b->data + tail + 4, cp__ipc_magic, 6);
  return b->failed ? ENOMEM : 0;
}

/* Appends one column to the body, 8-aligned, written in place (no zeroing, no staging copy); returns its
 * length in the body. A compressed buffer starts with its uncompressed length (Arrow's BodyCompression). */
static int64_t body_buffer(cp_buf *b, const void *data, size_t size, cp_compression compression, int level) {
  size_t start = buf_reserve(b, 0, 8);
  size_t room = compression ? 8 + ZSTD_compressBound(size) : size;
  if (!buf_grow(b, room)) return 0;
  if (compression == CP_COMPRESSION_NONE) {
    if (size) memcpy(b->data + start, data, size);
    b->len = start + size;
    return (int64_t)size;
  }
  size_t c = ZSTD_compress(b->data + start + 8, room - 8, data, size, level);
  if (ZSTD_isError(c)) {
    b->failed = true;
    return 0;
  }
  put_i64(b, start, (int64_t)size);
  b->len = start + 8 + c;
  return (int64_t)(8 + c);
}

/* The framed RecordBatch metadata from offset 0 of b. Its length depends only on whether the body is
 * compressed, so it can be written once to size it and again with the body's real lengths. */
static void batch_metadata(cp_buf *b, uint32_t rows, int64_t body_len, const int64_t len[2], int64_t off1,
                           bool compressed) {
  b->len = 0;
  buf_reserve(b, 8, 8);
  size_t header = message(b, MESSAGE_RECORD_BATCH, body_len);
  static const uint8_t sizes[4] = {8, 4, 4, 4};
  size_t f[4];
  size_t batch = table(b, compressed ? 4 : 3, sizes, f);
  link(b, header, batch);
  put_i64(b, f[0], rows);
  size_t nodes = vector(b, f[1], 2, 16, 8);
  for (int i = 0; i < 2; i++) put_i64(b, nodes + 16 * (size_t)i, rows); /* null_count stays 0 */
  size_t bufs = vector(b, f[2], 4, 16, 8);
  /* validity (empty), values of column 0, validity (empty), values of column 1 */
  put_i64(b, bufs + 24, len[0]);
  put_i64(b, bufs + 32, off1);
  put_i64(b, bufs + 48, off1);
  put_i64(b, bufs + 56, len[1]);
  if (compressed) {
    static const uint8_t c_sizes[2] = {1, 1};
    size_t g[2];
    size_t t = table(b, 2, c_sizes, g);
    link(b, f[3], t);
    put_u8(b, g[0], CODEC_ZSTD);
  }
  frame(b);
}

int cp__ipc_batch(cp_buf *b, const void *col0, const void *col1, uint32_t rows, cp_compression compression, int level) {
  bool compressed = compression != CP_COMPRESSION_NONE;
  int64_t len[2] = {0, 0};
  b->failed = false;
  batch_metadata(b, rows, 0, len, 0, compressed);
  size_t meta_len = b->len, bytes = (size_t)rows * 8;
  buf_grow(b, 2 * (compressed ? 8 + ZSTD_compressBound(bytes) : bytes) + 16); /* one allocation */
  len[0] = body_buffer(b, col0, bytes, compression, level);
  int64_t off1 = (int64_t)(buf_reserve(b, 0, 8) - meta_len);
  len[1] = body_buffer(b, col1, bytes, compression, level);
  buf_reserve(b, 0, 8);
  if (b->failed) return EIO; /* out of memory or a codec error: the caller counts the rows as dropped */
  size_t total = b->len;
  batch_metadata(b, rows, (int64_t)(total - meta_len), len, off1, compressed);
  if (b->len != meta_len) return EIO; /* the layout is fixed: this would be a bug in the encoder */
  b->len = total;
  return b->failed ? ENOMEM : 0;
}
