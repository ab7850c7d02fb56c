/* The library started with its default options, logging into a new folder made from `dir` (a mkdtemp template). */
#ifndef CP_START_H
#define CP_START_H
#include <stdlib.h>

#include "check.h"
#include "cloudprofiler.h"

static inline void start_in_new_folder(char *dir) {
  CHECK(mkdtemp(dir));
  cp_options o;
  cp_options_init(&o);
  o.log_dir = dir;
  cp_error err;
  CHECK(cp_start(&o, &err) == 0);
}
#endif
