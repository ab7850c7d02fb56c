/* The IPC encoder: messages framed and padded, columns and metadata read back through the flatbuffers'
 * vtables, ZSTD body compression round-trips, the footer lists every batch and carries its own metadata, and
 * equal-length metadata values give equal-length schema messages (what the in-place header rewrite relies on). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"
#include "ipc_read.h"

/* A file as a channel writes it: the magic, the schema message parts[0], the batches parts[1..n), then the end
 * of the file with a footer of these metadata pairs (or, with footer_keys NULL, only the end-of-stream marker). */
static void write_all(const char *path, const cp_buf *parts, size_t n, const char *const *footer_keys,
                      const char *const *footer_values, size_t n_footer) {
  FILE *fp = fopen(path, "wb");
  CHECK(fp);
  CHECK(fwrite(cp__ipc_magic, 1, sizeof cp__ipc_magic, fp) == sizeof cp__ipc_magic);
  cp_ipc_block blocks[8] = {{0}};
  int64_t offset = sizeof cp__ipc_magic;
  for (size_t i = 0; i < n; i++) {
    CHECK(fwrite(parts[i].data, 1, parts[i].len, fp) == parts[i].len);
    uint32_t meta_len;
    memcpy(&meta_len, parts[i].data + 4, 4);
    if (i)
      blocks[i - 1] = (cp_ipc_block){
          .offset = offset, .meta_len = (int32_t)(8 + meta_len), .body_len = (int64_t)(parts[i].len - 8 - meta_len)};
    offset += (int64_t)parts[i].len;
  }
  cp_buf end = {0};
  if (footer_keys) CHECK(cp__ipc_file_end(&end, 0, footer_keys, footer_values, n_footer, blocks, n - 1) == 0);
  if (footer_keys) CHECK(fwrite(end.data, 1, end.len, fp) == end.len);
  else CHECK(fwrite(cp__ipc_eos, 1, sizeof cp__ipc_eos, fp) == sizeof cp__ipc_eos);
  cp__buf_free(&end);
  fclose(fp);
}

static void check_framed(const cp_buf *b) {
  CHECK(b->len % 8 == 0);
  uint32_t marker, meta_len;
  memcpy(&marker, b->data, 4);
  memcpy(&meta_len, b->data + 4, 4);
  CHECK(marker == 0xffffffffu && meta_len % 8 == 0 && meta_len + 8 <= b->len);
}

static void schema_lengths_depend_only_on_value_lengths(void) {
  const char *keys[] = {"records.written", "closed", "caller key"};
  const char *before[] = {"0                   ", "false", "x"};
  const char *after[] = {"12345678901234567890", "true ", "y"};
  cp_buf a = {0}, b = {0}, c = {0};
  CHECK(cp__ipc_schema(&a, 0, keys, before, 3) == 0);
  CHECK(cp__ipc_schema(&b, 0, keys, after, 3) == 0);
  check_framed(&a);
  CHECK(a.len == b.len);
  size_t differing = 0;
  for (size_t i = 0; i < a.len; i++) differing += a.data[i] != b.data[i];
  CHECK(differing == 20 + 5 + 1); /* the value bytes and nothing else */
  const char *longer[] = {"0                   ", "false", "xy"};
  CHECK(cp__ipc_schema(&c, 0, keys, longer, 3) == 0);
  CHECK(c.len >= a.len);
  cp__buf_free(&a);
  cp__buf_free(&b);
  cp__buf_free(&c);
}

static void round_trip(const char *dir, cp_compression compression) {
  enum { ROWS = 1000 };
  static int64_t ids[ROWS];
  static uint64_t tscs[ROWS];
  for (int i = 0; i < ROWS; i++) ids[i] = (int64_t)i * 7 - 3000, tscs[i] = 1000000000000ull + (uint64_t)i * 31;
  const char *keys[] = {"handler", "empty"};
  const char *values[] = {"buffered", ""};
  cp_buf parts[4] = {{0}};
  CHECK(cp__ipc_schema(&parts[0], 0, keys, values, 2) == 0);
  CHECK(cp__ipc_batch(&parts[1], ids, tscs, 3, compression, 1) == 0);         /* odd row count: padding */
  CHECK(cp__ipc_batch(&parts[2], ids + 3, tscs + 3, 0, compression, 1) == 0); /* an empty batch is valid */
  CHECK(cp__ipc_batch(&parts[3], ids + 3, tscs + 3, ROWS - 3, compression, 1) == 0);
  for (int i = 0; i < 4; i++) check_framed(&parts[i]);
  if (compression) CHECK(parts[3].len < (ROWS - 3) * 16 / 2); /* regular columns compress well */

  char path[4200];
  snprintf(path, sizeof path, "%s/roundtrip-%d.arrows", dir, (int)compression);
  const char *footer_values[] = {"buffered", "final"};
  write_all(path, parts, 4, keys, footer_values, 2);
  ipc_file f;
  int rc = ipc_read(path, &f);
  if (rc) fprintf(stderr, "%s\n", f.error);
  CHECK(rc == 0 && f.magic && f.eos && f.footer && f.batches == 3 && f.rows == ROWS);
  CHECK(f.compressed == (compression != CP_COMPRESSION_NONE));
  for (int i = 0; i < 2; i++) {
    const ipc_schema *s = i ? &f.footer_schema : &f.schema;
    CHECK(!strcmp(s->field0, "tuple_id") && !strcmp(s->field1, "tsc") && s->field0_signed && s->field1_signed);
  }
  CHECK(!strcmp(ipc_meta(&f, "handler"), "buffered") && !strcmp(ipc_meta(&f, "empty"), ""));
  CHECK(!strcmp(ipc_footer_meta(&f, "empty"), "final")); /* the footer's schema has values of its own */
  CHECK(!memcmp(f.col0, ids, sizeof ids) && !memcmp(f.col1, tscs, sizeof tscs));
  ipc_free(&f);

  /* Cut inside the last batch: the reader keeps every complete message before it. */
  CHECK(truncate(path, (off_t)(8 + parts[0].len + parts[1].len + parts[2].len + 12)) == 0);
  CHECK(ipc_read(path, &f) == 0 && !f.eos && !f.footer && f.batches == 2 && f.rows == 3);
  ipc_free(&f);

  /* Without a footer (its list of batches was lost) the file still ends its stream. */
  write_all(path, parts, 4, NULL, NULL, 0);
  CHECK(ipc_read(path, &f) == 0 && f.eos && !f.footer && f.rows == ROWS);
  ipc_free(&f);
  for (int i = 0; i < 4; i++) cp__buf_free(&parts[i]);
}

static void counter_schema(const char *dir) {
  cp_buf parts[1] = {{0}};
  CHECK(cp__ipc_schema(&parts[0], 1, NULL, NULL, 0) == 0);
  char path[4200];
  snprintf(path, sizeof path, "%s/counter.arrows", dir);
  write_all(path, parts, 1, (const char *const[]){"closed"}, (const char *const[]){"true"}, 1);
  ipc_file f;
  CHECK(ipc_read(path, &f) == 0 && f.footer && f.rows == 0 && f.batches == 0 && f.schema.n_meta == 0);
  CHECK(!strcmp(f.schema.field0, "period_start_tsc") && !strcmp(f.schema.field1, "count"));
  CHECK(f.schema.field0_signed && f.schema.field1_signed); /* int64: SQL engines subtract without overflow */
  CHECK(!strcmp(ipc_footer_meta(&f, "closed"), "true"));
  ipc_free(&f);
  cp__buf_free(&parts[0]);
}

int main(void) {
  char dir[] = "/tmp/cp_test_arrow_ipc.XXXXXX";
  CHECK(mkdtemp(dir));
  schema_lengths_depend_only_on_value_lengths();
  round_trip(dir, CP_COMPRESSION_NONE);
  round_trip(dir, CP_COMPRESSION_ZSTD);
  counter_schema(dir);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  puts("test_arrow_ipc: ok");
  return 0;
}
