/* The one way a function of the library reports an error: an errno value and, for a caller that asked for it, a
 * message naming the bad value. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

int cp__fail(cp_error *error, int code, const char *fmt, ...) {
  if (error) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error->message, sizeof error->message, fmt, ap);
    va_end(ap);
    error->code = code;
  }
  return code;
}
