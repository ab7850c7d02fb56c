/* What the hand-off tests share: the one log file of a channel, read whole. */
#ifndef CP_HANDOFF_TESTS_H
#define CP_HANDOFF_TESTS_H

#include <dirent.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ipc_read.h"

/* The rows of the one file of `channel` in dir, read whole (its footer included). */
static size_t rows_of(const char *dir, const char *channel, ipc_file *f) {
  DIR *d = opendir(dir);
  CHECK(d);
  char *path = NULL; /* on the heap: ipc_read's messages then fit whatever its length */
  for (struct dirent *e; (e = readdir(d));)
    if (!strncmp(e->d_name, channel, strlen(channel)) && e->d_name[strlen(channel)] == '.') {
      free(path);
      path = malloc(strlen(dir) + strlen(e->d_name) + 2);
      CHECK(path);
      sprintf(path, "%s/%s", dir, e->d_name);
    }
  closedir(d);
  CHECK(path && ipc_read(path, f) == 0 && f->footer);
  free(path);
  return f->rows;
}

#endif
