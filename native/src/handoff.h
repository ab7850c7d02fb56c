/* The layout of a hand-off channel's shared memory, shared by its writer (handoff.c) and its owner (inbox.c):
 * processes of one host and one build of the library, so native byte order and alignment. The memory is a memfd of
 * the writer, sealed against shrinking; the writer names it in the inbox folder by a file "<pid>-<n>.handoff" that
 * holds "/proc/<pid>/fd/<fd>\n", through which the owner opens it. The writer fills the blocks in ring order;
 * a block's state goes FREE -> FILLING (writer) -> FULL (writer) -> FREE (owner), and its count is published with
 * release after the records' columns are written, so the owner reads only complete records. The owner's library
 * writes a block's records into its files straight from this memory (no copy of its own): it hands a block back
 * (FREE) once they are encoded, and takes a block still filling only once its writer closed, died or asks for it
 * (`wanted`, its flush), or after the owner's flush interval. A writer that finds no free block sleeps on the next
 * block's state (a futex of the shared memory, which both processes map) and says so in `waiting`: the owner wakes
 * it as it frees a block, so that it neither sleeps past that nor wakes to look before. */
#ifndef CP_HANDOFF_H
#define CP_HANDOFF_H

#include <stdatomic.h>
#include <stdint.h>

#include "internal.h"

#define CP_HANDOFF_MAGIC "CPHOFF3"   /* 8 bytes with its NUL */
#define CP_HANDOFF_SUFFIX ".handoff" /* a whole name: the writer renames it to this once its header is set */
#define CP_INBOX_OWNER "owner"       /* "<pid> <start time>" of the inbox's owner, in its folder */

enum { CP_HANDOFF_FREE = 0, CP_HANDOFF_FILLING = 1, CP_HANDOFF_FULL = 2 };

typedef struct cp_handoff_block_head {
  _Atomic uint32_t state;
  _Atomic uint32_t count; /* records written in the block */
} cp_handoff_block_head;

typedef struct cp_handoff_header {
  char magic[8];
  uint32_t blocks, block_records;
  int32_t writer_pid;
  int32_t handler;       /* a cp_handler, or -1: the owner's rules choose */
  uint64_t writer_start; /* the writer's start time (/proc/<pid>/stat), so that a reused pid is not taken for it */
  int64_t params[3];
  uint32_t n_params, n_meta; /* text: the name, then n_meta key and value pairs, each NUL-terminated */
  _Atomic uint32_t closed;   /* set by the writer after its last count */
  _Atomic uint32_t attached; /* set by the owner once it mapped the memory: the writer's open waits for it */
  _Atomic uint64_t dropped;  /* by the writer */
  _Atomic uint64_t taken;    /* by the owner */
  char text[CP_HANDOFF_TEXT_MAX];
  cp_handoff_block_head heads[CP_HANDOFF_BLOCKS];
  _Atomic uint64_t wanted;  /* by the writer's flush: take what it published up to here, filling block or not */
  _Atomic uint32_t waiting; /* by the writer: it sleeps on a block's state until the owner frees the block */
} cp_handoff_header;

/* Block b's columns: ids then TSCs, after the header, each block on its own pages. */
#define CP_HANDOFF_BLOCK_BYTES ((size_t)CP_HANDOFF_BLOCK_RECORDS * 16)
#define CP_HANDOFF_DATA_OFFSET (((sizeof(cp_handoff_header) + 4095) / 4096) * 4096)
#define CP_HANDOFF_FILE_BYTES (CP_HANDOFF_DATA_OFFSET + CP_HANDOFF_BLOCKS * CP_HANDOFF_BLOCK_BYTES)

static inline int64_t *cp__handoff_ids(void *map, uint32_t block) {
  return (int64_t *)((char *)map + CP_HANDOFF_DATA_OFFSET + block * CP_HANDOFF_BLOCK_BYTES);
}
static inline uint64_t *cp__handoff_tscs(void *map, uint32_t block) {
  return (uint64_t *)(cp__handoff_ids(map, block) + CP_HANDOFF_BLOCK_RECORDS);
}

/* Sleeps while *word holds `value`, at most timeout_ns, or until cp__futex_wake(word) in any process that maps the
 * same memory (a shared futex: no FUTEX_PRIVATE_FLAG); may return early, so callers check the word again. */
CP_INTERNAL void cp__futex_wait(_Atomic uint32_t *word, uint32_t value, uint64_t timeout_ns);
CP_INTERNAL void cp__futex_wake(_Atomic uint32_t *word);
/* CLOCK_MONOTONIC in ns: the writer's and the owner's deadlines and intervals. */
CP_INTERNAL uint64_t cp__monotonic_ns(void);

/* A process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat), 0 when it does not exist. */
CP_INTERNAL uint64_t cp__process_start(int pid);

/* 0 when dir is a folder (not a link) of this user that no other user may enter, else EACCES or ENOTDIR saying why:
 * an inbox folder in /dev/shm, which every user may write, could have been made first by another. */
CP_INTERNAL int cp__handoff_folder_check(const char *dir, cp_error *error);

/* ---- inbox.c ---- */
CP_INTERNAL void cp__inbox_stop(void);   /* cp_stop, first: takes what is published and closes the channels */
CP_INTERNAL void cp__inbox_forget(void); /* a child of fork(): no inbox thread */

#endif
