/* A minimal assertion for the C tests: prints the failed expression and its line, exits 1. */
#ifndef CP_CHECK_H
#define CP_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)
#endif
