/* What every file of the library shares: its state (options in effect, the host's identity, the channels), its
 * version, and the queues that carry jobs to its background threads. */
#include "internal.h"

cp_library cp__lib = {
    .mutex = PTHREAD_MUTEX_INITIALIZER,
    .queue_mutex = PTHREAD_MUTEX_INITIALIZER,
    .compress_cond = PTHREAD_COND_INITIALIZER,
    .io_cond = PTHREAD_COND_INITIALIZER,
    .timer_cond = PTHREAD_COND_INITIALIZER,
};

int cp_version(void) { return CP_VERSION_NUMBER; }

const char *cp_version_string(void) {
#define CP_STR2(x) #x
#define CP_STR(x) CP_STR2(x)
  return CP_STR(CP_VERSION_MAJOR) "." CP_STR(CP_VERSION_MINOR) "." CP_STR(CP_VERSION_PATCH);
}

uint64_t cp__ns_to_ticks(uint64_t ns) { return (uint64_t)((double)ns * cp__lib.frequency.hz / 1e9); }

void cp__enqueue(cp_job **head, cp_job **tail, pthread_cond_t *cond, cp_job *job) {
  job->next = NULL;
  if (*tail) (*tail)->next = job;
  else *head = job;
  *tail = job;
  pthread_cond_signal(cond);
}

void cp__submit(cp_job *job) {
  cp_library *g = &cp__lib;
  pthread_mutex_lock(&g->queue_mutex);
  cp__enqueue(&g->compress_head, &g->compress_tail, &g->compress_cond, job);
  pthread_mutex_unlock(&g->queue_mutex);
}

void cp__timer_kick(void) {
  pthread_mutex_lock(&cp__lib.queue_mutex);
  cp__lib.timer_wakeup = true;
  pthread_cond_signal(&cp__lib.timer_cond);
  pthread_mutex_unlock(&cp__lib.queue_mutex);
}
