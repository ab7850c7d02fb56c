/* A short scheduler time slice for the threads that wait on another host's packets (probe.c, ret.c): see
 * cp__short_slice. */
#define _GNU_SOURCE
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* The kernel's sched_attr (sched_setattr(2)): not in glibc's headers. */
typedef struct {
  uint32_t size, policy;
  uint64_t flags;
  int32_t nice;
  uint32_t priority;
  uint64_t runtime, deadline, period;
} sched_attr;

enum { SHORT_SLICE_NS = 100000 };

/* Asks for a short time slice for the calling thread while it waits on another host's packets, and returns the slice it
 * had (0: unchanged). On a busy machine the scheduler wakes a probe's receiver behind the task running on its CPU,
 * which keeps the CPU for its whole slice (1.4 ms by default on 2 cores): with 16 processes spinning on 2 cores most
 * rounds came back in 2 to 8 ms. Linux 6.12 and later let any thread of the normal class ask for a slice of its own
 * (the runtime of sched_setattr, 0.1 to 100 ms), and a woken thread whose slice is shorter than the running one's
 * preempts it; the thread still gets its fair share, in shorter turns. Earlier kernels ignore the runtime of that
 * class, and a thread of another class (real-time, idle) is left as it is. */
uint64_t cp__short_slice(void) {
  sched_attr attr = {0};
  if (syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) != 0 || attr.policy != 0 /* SCHED_OTHER */ ||
      attr.runtime == SHORT_SLICE_NS)
    return 0;
  uint64_t before = attr.runtime;
  attr.size = sizeof attr;
  attr.runtime = SHORT_SLICE_NS;
  return syscall(SYS_sched_setattr, 0, &attr, 0) == 0 ? before : 0;
}

/* Gives the calling thread back the slice cp__short_slice() returned. */
void cp__restore_slice(uint64_t before) {
  sched_attr attr = {0};
  if (!before || syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) != 0 || attr.policy != 0) return;
  attr.size = sizeof attr;
  attr.runtime = before;
  (void)syscall(SYS_sched_setattr, 0, &attr, 0);
}
