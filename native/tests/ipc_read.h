/* A small reader of the library's Arrow IPC files for the C tests: walks the encapsulated messages after the
 * leading magic, reads the flatbuffers through their vtables (as any Arrow reader would, not by knowing the
 * encoder's layout), decompresses ZSTD buffers and concatenates the two columns of every record batch. After the
 * end-of-stream marker it reads the footer and checks that its blocks are the batches it walked.
 *
 * It reads only what the library writes (two 8-byte columns, no nulls) and refuses anything else with a
 * message in `error`. A file cut after its last complete message reads like a whole one, with `eos` and
 * `footer` false. */
#ifndef CP_IPC_READ_H
#define CP_IPC_READ_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

typedef struct ipc_schema {
  char *keys[128], *values[128];
  size_t n_meta;
  char field0[32], field1[32]; /* column names */
  int field0_signed, field1_signed;
} ipc_schema;

typedef struct ipc_file {
  ipc_schema schema;        /* of the schema message at the start (values padded for the in-place rewrite) */
  ipc_schema footer_schema; /* of the footer, when there is one */
  int64_t *col0;
  uint64_t *col1;
  size_t rows, batches;
  size_t schema_len; /* bytes of the schema message, framing included */
  bool compressed;   /* at least one batch had body compression */
  bool magic;        /* the file starts with "ARROW1\0\0" */
  bool eos;          /* the end-of-stream marker was present */
  bool footer;       /* a footer followed it, listing exactly the batches read */
  char error[256];
} ipc_file;

static uint32_t ipc__u32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static uint16_t ipc__u16(const uint8_t *p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}
static int64_t ipc__i64(const uint8_t *p) {
  int64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* Position of field `i` of the table at `t`, or NULL when the field is absent. */
static const uint8_t *ipc__field(const uint8_t *t, int i) {
  const uint8_t *vt = t - (int32_t)ipc__u32(t);
  uint16_t vt_len = ipc__u16(vt);
  uint16_t off = 4 + 2 * i < vt_len ? ipc__u16(vt + 4 + 2 * i) : 0;
  return off ? t + off : NULL;
}
static const uint8_t *ipc__deref(const uint8_t *field) { return field ? field + ipc__u32(field) : NULL; }
static char *ipc__string(const uint8_t *field) {
  const uint8_t *s = ipc__deref(field);
  if (!s) return strdup("");
  uint32_t n = ipc__u32(s);
  char *out = malloc(n + 1);
  memcpy(out, s + 4, n);
  out[n] = '\0';
  return out;
}

static void ipc__schema_free(ipc_schema *s) {
  for (size_t i = 0; i < s->n_meta; i++) free(s->keys[i]), free(s->values[i]);
}

static void ipc_free(ipc_file *f) {
  ipc__schema_free(&f->schema);
  ipc__schema_free(&f->footer_schema);
  free(f->col0);
  free(f->col1);
  memset(f, 0, sizeof *f);
}

static const char *ipc__meta(const ipc_schema *s, const char *key) {
  for (size_t i = 0; i < s->n_meta; i++)
    if (!strcmp(s->keys[i], key)) return s->values[i];
  return NULL;
}
/* A metadata value of the schema message, and of the footer's schema. */
static inline const char *ipc_meta(const ipc_file *f, const char *key) { return ipc__meta(&f->schema, key); }
static inline const char *ipc_footer_meta(const ipc_file *f, const char *key) {
  return ipc__meta(&f->footer_schema, key);
}

/* Reads a Schema table: two fields (names, signedness) and the metadata pairs; 0 or -1 with f->error set. */
static int ipc__schema(ipc_file *f, const uint8_t *schema, ipc_schema *out) {
  const uint8_t *fields = ipc__deref(ipc__field(schema, 1));
  if (!fields || ipc__u32(fields) != 2) return snprintf(f->error, sizeof f->error, "schema does not have 2 fields"), -1;
  for (int i = 0; i < 2; i++) {
    const uint8_t *field = ipc__deref(fields + 4 + 4 * i);
    char *name = ipc__string(ipc__field(field, 0));
    snprintf(i ? out->field1 : out->field0, 32, "%s", name);
    free(name);
    const uint8_t *int_type = ipc__deref(ipc__field(field, 3));
    const uint8_t *signed_f = int_type ? ipc__field(int_type, 1) : NULL;
    *(i ? &out->field1_signed : &out->field0_signed) = signed_f ? *signed_f : 0;
  }
  const uint8_t *kv = ipc__deref(ipc__field(schema, 2));
  for (uint32_t i = 0; kv && i < ipc__u32(kv) && out->n_meta < 128; i++) {
    const uint8_t *pair = ipc__deref(kv + 4 + 4 * i);
    out->keys[out->n_meta] = ipc__string(ipc__field(pair, 0));
    out->values[out->n_meta++] = ipc__string(ipc__field(pair, 1));
  }
  return 0;
}

/* Where a batch lies: the offset of its message, its metadata length and its body length. */
typedef int64_t ipc__batch_at[3];

/* The footer in data[pos, size): its schema, and blocks equal to the `n` batches walked; 0 or -1. */
static int ipc__footer(ipc_file *f, const uint8_t *data, size_t pos, size_t size, const ipc__batch_at *walked,
                       size_t n) {
  if (size - pos < 10 || memcmp(data + size - 6, "ARROW1", 6) || ipc__u32(data + size - 10) != size - pos - 10)
    return snprintf(f->error, sizeof f->error, "%zu bytes after the end-of-stream marker are no footer", size - pos),
           -1;
  const uint8_t *footer = data + pos + ipc__u32(data + pos);
  const uint8_t *version = ipc__field(footer, 0), *schema = ipc__deref(ipc__field(footer, 1));
  const uint8_t *blocks = ipc__deref(ipc__field(footer, 3));
  if (!version || ipc__u16(version) != 4 || !schema || !blocks)
    return snprintf(f->error, sizeof f->error, "the footer lacks its version, schema or blocks"), -1;
  if (ipc__schema(f, schema, &f->footer_schema)) return -1;
  if (ipc__u32(blocks) != n)
    return snprintf(f->error, sizeof f->error, "the footer lists %u batches, the file holds %zu", ipc__u32(blocks), n),
           -1;
  if ((size_t)(blocks + 4 - data - pos) % 8)
    return snprintf(f->error, sizeof f->error, "the footer's blocks are not 8-aligned"), -1;
  for (size_t i = 0; i < n; i++) {
    const uint8_t *b = blocks + 4 + 24 * i; /* Block {offset: long, metaDataLength: int, (pad), bodyLength: long} */
    if (ipc__i64(b) != walked[i][0] || (int32_t)ipc__u32(b + 8) != walked[i][1] || ipc__i64(b + 16) != walked[i][2])
      return snprintf(f->error, sizeof f->error, "footer block %zu does not match the batch at %lld", i,
                      (long long)walked[i][0]),
             -1;
  }
  f->footer = true;
  return 0;
}

/* Appends one column buffer (rows x 8 bytes) of a batch to `dst` at `at`; 0 or -1 with f->error set. */
static int ipc__column(ipc_file *f, const uint8_t *body, int64_t off, int64_t len, bool zstd, size_t rows, void *dst) {
  if (off % 8) return snprintf(f->error, sizeof f->error, "buffer offset %lld is not 8-aligned", (long long)off), -1;
  if (!zstd) {
    if ((size_t)len != rows * 8)
      return snprintf(f->error, sizeof f->error, "buffer of %lld bytes for %zu rows", (long long)len, rows), -1;
    memcpy(dst, body + off, rows * 8);
    return 0;
  }
  int64_t raw = ipc__i64(body + off);
  if (raw == -1) { /* stored uncompressed */
    memcpy(dst, body + off + 8, rows * 8);
    return 0;
  }
  size_t got = ZSTD_decompress(dst, rows * 8, body + off + 8, (size_t)len - 8);
  if (ZSTD_isError(got) || got != rows * 8 || raw != (int64_t)rows * 8)
    return snprintf(f->error, sizeof f->error, "ZSTD buffer does not hold %zu rows", rows), -1;
  return 0;
}

static int ipc_read(const char *path, ipc_file *f) {
  memset(f, 0, sizeof *f);
  FILE *fp = fopen(path, "rb");
  if (!fp) return snprintf(f->error, sizeof f->error, "cannot open %s", path), -1;
  fseek(fp, 0, SEEK_END);
  size_t size = (size_t)ftell(fp);
  fseek(fp, 0, SEEK_SET);
  uint8_t *data = malloc(size ? size : 1);
  size_t got = fread(data, 1, size, fp);
  fclose(fp);
  int rc = 0;
  size_t cap = 0, walked_cap = 0;
  ipc__batch_at *walked = NULL;
  f->magic = size >= 8 && !memcmp(data, "ARROW1\0\0", 8);
  size_t pos = f->magic ? 8 : 0;
  if (!f->magic) rc = -1, snprintf(f->error, sizeof f->error, "%s does not start with the magic ARROW1", path);
  while (rc == 0 && got == size && pos + 8 <= size) {
    if (ipc__u32(data + pos) != 0xffffffffu) {
      rc = -1;
      snprintf(f->error, sizeof f->error, "no continuation marker at %zu", pos);
      break;
    }
    uint32_t meta_len = ipc__u32(data + pos + 4);
    if (meta_len == 0) {
      f->eos = true;
      pos += 8;
      break;
    }
    if (meta_len % 8) {
      rc = -1;
      snprintf(f->error, sizeof f->error, "metadata length %u is not a multiple of 8", meta_len);
      break;
    }
    const uint8_t *meta = data + pos + 8;
    if (pos + 8 + meta_len > size) break; /* cut short: stop at the last complete message */
    const uint8_t *msg = meta + ipc__u32(meta);
    const uint8_t *version = ipc__field(msg, 0), *type = ipc__field(msg, 1), *body_len_f = ipc__field(msg, 3);
    int64_t body_len = body_len_f ? ipc__i64(body_len_f) : 0;
    const uint8_t *header = ipc__deref(ipc__field(msg, 2));
    if (!version || ipc__u16(version) != 4 || !type || !header) {
      rc = -1;
      snprintf(f->error, sizeof f->error, "message at %zu is not a V5 message with a header", pos);
      break;
    }
    if (body_len % 8 || pos + 8 + meta_len + (size_t)body_len > size) {
      if (body_len % 8)
        rc = -1, snprintf(f->error, sizeof f->error, "body length %lld is not a multiple of 8", (long long)body_len);
      break;
    }
    const uint8_t *body = meta + meta_len;
    if (*type == 1) { /* Schema */
      if (f->batches || f->schema_len) {
        rc = -1;
        snprintf(f->error, sizeof f->error, "second schema at %zu", pos);
        break;
      }
      f->schema_len = 8 + meta_len;
      if ((rc = ipc__schema(f, header, &f->schema))) break;
    } else if (*type == 3) { /* RecordBatch */
      size_t rows = (size_t)ipc__i64(ipc__field(header, 0));
      const uint8_t *buffers = ipc__deref(ipc__field(header, 2));
      const uint8_t *compression = ipc__deref(ipc__field(header, 3));
      bool zstd = compression != NULL;
      if (zstd) {
        const uint8_t *codec = ipc__field(compression, 0);
        if (codec && *codec != 1) {
          rc = -1;
          snprintf(f->error, sizeof f->error, "codec %u is not ZSTD", *codec);
          break;
        }
        f->compressed = true;
      }
      if (!buffers || ipc__u32(buffers) != 4) {
        rc = -1;
        snprintf(f->error, sizeof f->error, "batch does not have 4 buffers");
        break;
      }
      if (f->rows + rows > cap) {
        cap = (f->rows + rows) * 2;
        f->col0 = realloc(f->col0, cap * 8);
        f->col1 = realloc(f->col1, cap * 8);
      }
      const uint8_t *b = buffers + 4; /* 16-byte structs {offset, length}: validity0, values0, validity1, values1 */
      if (ipc__i64(b + 8) != 0 || ipc__i64(b + 40) != 0) {
        rc = -1;
        snprintf(f->error, sizeof f->error, "validity buffers are not empty");
        break;
      }
      if ((rc = ipc__column(f, body, ipc__i64(b + 16), ipc__i64(b + 24), zstd, rows, f->col0 + f->rows))) break;
      if ((rc = ipc__column(f, body, ipc__i64(b + 48), ipc__i64(b + 56), zstd, rows, f->col1 + f->rows))) break;
      if (f->batches == walked_cap) walked = realloc(walked, (walked_cap = 2 * walked_cap + 16) * sizeof *walked);
      walked[f->batches][0] = (int64_t)pos, walked[f->batches][1] = 8 + meta_len, walked[f->batches][2] = body_len;
      f->rows += rows;
      f->batches++;
    } else {
      rc = -1;
      snprintf(f->error, sizeof f->error, "unexpected message type %u", *type);
      break;
    }
    pos += 8 + meta_len + (size_t)body_len;
  }
  if (got != size) rc = -1, snprintf(f->error, sizeof f->error, "cannot read %s", path);
  if (rc == 0 && !f->schema_len) rc = -1, snprintf(f->error, sizeof f->error, "%s has no schema message", path);
  if (rc == 0 && f->eos && pos != size) rc = ipc__footer(f, data, pos, size, walked, f->batches);
  free(walked);
  free(data);
  return rc;
}

#endif
