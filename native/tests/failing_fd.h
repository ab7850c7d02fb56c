/* A disk that fills up under an open channel, and the process's descriptors, for the tests of failures: the
 * descriptor open on a file gets /dev/full in its place, so that every later write to it fails with ENOSPC. */
#ifndef CP_FAILING_FD_H
#define CP_FAILING_FD_H
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Calls f(fd, target, arg) for every open descriptor of this process but the one that lists them; stops at and
 * returns the first nonzero result. */
static inline int each_fd(int (*f)(int fd, const char *target, void *arg), void *arg) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int result = 0;
  for (struct dirent *e; !result && (e = readdir(d));) {
    int fd = atoi(e->d_name);
    if (e->d_name[0] == '.' || fd == dirfd(d)) continue;
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0) continue;
    target[n] = '\0';
    result = f(fd, target, arg);
  }
  closedir(d);
  return result;
}

static inline int count_one(int fd, const char *target, void *arg) {
  (void)fd, (void)target;
  ++*(int *)arg;
  return 0;
}

static inline int open_fds(void) {
  int n = 0;
  each_fd(count_one, &n);
  return n;
}

static inline int fd_on(int fd, const char *target, void *path) { return strcmp(target, path) == 0 ? fd : 0; }

/* Puts /dev/full in the place of the descriptor open on `path`; returns that descriptor, or 0 when none is. */
static inline int fill_disk_under(const char *path) {
  int fd = each_fd(fd_on, (void *)path);
  int full = open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (fd <= 0 || full < 0 || dup2(full, fd) != fd) return 0;
  close(full);
  return fd;
}

#endif
