/* MinRTT probes over UDP: a responder thread that answers with its TSC, and a prober. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "hmac.h"
#include "internal.h"

enum { REQUEST_MAGIC = 0x51525043u /* "CPRQ" */, ANSWER_MAGIC = 0x53525043u /* "CPRS" */ };

/* Packets in the host's byte order (x86-64: little-endian); the tag is HMAC-SHA256 of the bytes before it, under
 * the secret, cut to CP_PROBE_TAG_BYTES (all zero without a secret). */
typedef struct {
  uint32_t magic, seq;
  uint64_t nonce;
  uint8_t tag[CP_PROBE_TAG_BYTES];
} request;

typedef struct {
  uint32_t magic, seq;
  uint64_t nonce, tsc;
  uint32_t cpu, pad;
  uint8_t tag[CP_PROBE_TAG_BYTES];
} answer;

_Static_assert(sizeof(request) == 32 && sizeof(answer) == 48, "probe packets have no padding");

/* The secret, made ready for the tags (none: packets are not tagged and tags not checked). */
typedef struct {
  bool keyed;
  cp_hmac_key key;
} tagger;

static void tagger_init(tagger *t, const uint8_t *secret, size_t secret_len) {
  t->keyed = secret_len > 0;
  if (t->keyed) cp__hmac_key_init(&t->key, secret, secret_len);
}

/* Writes the tag of the `len` bytes of `packet` before it into `tag`. */
static void tag_of(const tagger *t, const void *packet, size_t len, uint8_t *tag) {
  uint8_t mac[CP_SHA256_BYTES];
  memset(tag, 0, CP_PROBE_TAG_BYTES);
  if (!t->keyed) return;
  cp__hmac_sha256_keyed(&t->key, packet, len, mac);
  memcpy(tag, mac, CP_PROBE_TAG_BYTES);
}

/* Whether the packet's tag is its own (any tag without a secret), compared in constant time. */
static bool tag_ok(const tagger *t, const void *packet, size_t len, const uint8_t *tag) {
  if (!t->keyed) return true;
  uint8_t want[CP_PROBE_TAG_BYTES], diff = 0;
  tag_of(t, packet, len, want);
  for (int i = 0; i < CP_PROBE_TAG_BYTES; i++) diff |= want[i] ^ tag[i];
  return diff == 0;
}

struct cp_responder {
  int fd;
  uint16_t port;
  _Atomic int stop;
  _Atomic uint64_t answered, rejected;
  tagger tags;
  long delay_before_us, delay_after_us;
  pthread_t thread;
};

static void spin_us(long us) {
  if (us <= 0) return;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do clock_gettime(CLOCK_MONOTONIC, &b);
  while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

static int resolve(const char *address, uint16_t port, struct sockaddr_in *out, cp_error *error) {
  memset(out, 0, sizeof *out);
  out->sin_family = AF_INET;
  out->sin_port = htons(port);
  if (!address || inet_pton(AF_INET, address, &out->sin_addr) != 1)
    return cp__fail(error, EINVAL, "address '%s' is not an IPv4 address", address ? address : "(null)");
  return 0;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* After an answer the responder polls without sleeping for this long: probes come in runs, one right after the
 * other's answer, and a thread woken from a blocking receive adds microseconds to every round trip. */
enum { HOT_NS = 2000000 };

/* Whether the kernel took in the socket's last packet on `cpu`, the responder's: on one machine, the prober's CPU
 * when the others are busy (the kernel wakes each side on the other's CPU). Staying hot would then hold the
 * prober off that CPU for the whole hot time, and every round trip would last as long (2 ms under 16 spinning
 * processes on 2 cores). Asked after the answer is sent, outside the round trip. */
static bool same_cpu(int fd, uint32_t cpu) {
  int incoming = -1;
  socklen_t size = sizeof incoming;
  return getsockopt(fd, SOL_SOCKET, SO_INCOMING_CPU, &incoming, &size) == 0 && incoming >= 0 &&
         (uint32_t)incoming == cpu;
}

static ssize_t receive(cp_responder *r, request *q, struct sockaddr_in *from, socklen_t *from_len, bool hot) {
  int64_t until = hot ? now_ns() + HOT_NS : 0;
  while (hot && !atomic_load(&r->stop)) {
    *from_len = sizeof *from;
    ssize_t n = recvfrom(r->fd, q, sizeof *q, MSG_DONTWAIT, (struct sockaddr *)from, from_len);
    if (n >= 0 || errno != EAGAIN) return n;
    hot = now_ns() < until;
  }
  *from_len = sizeof *from;
  return recvfrom(r->fd, q, sizeof *q, 0, (struct sockaddr *)from, from_len);
}

static void *respond(void *arg) {
  cp_responder *r = arg;
  bool hot = false;
  cp__short_slice(); /* the thread is the responder's own: kept to its end */
  for (;;) {
    request q;
    struct sockaddr_in from;
    socklen_t from_len;
    ssize_t n = receive(r, &q, &from, &from_len, hot);
    if (atomic_load(&r->stop)) break;
    hot = false;
    if (n < 0) continue; /* the receive timeout: look at the stop flag again */
    if (n != sizeof q || q.magic != REQUEST_MAGIC || !tag_ok(&r->tags, &q, offsetof(request, tag), q.tag)) {
      atomic_fetch_add(&r->rejected, 1);
      continue;
    }
    spin_us(r->delay_before_us);
    answer a = {ANSWER_MAGIC, q.seq, q.nonce, 0, 0, 0, {0}};
    a.tsc = cp_tscp(&a.cpu);
    tag_of(&r->tags, &a, offsetof(answer, tag), a.tag);
    spin_us(r->delay_after_us);
    if (sendto(r->fd, &a, sizeof a, 0, (struct sockaddr *)&from, from_len) == sizeof a)
      atomic_fetch_add(&r->answered, 1);
    hot = !same_cpu(r->fd, a.cpu);
  }
  return NULL;
}

int cp_responder_start(const char *address, uint16_t port, const uint8_t *secret, size_t secret_len, cp_responder **out,
                       cp_error *error) {
  struct sockaddr_in addr;
  int rc = resolve(address, port, &addr, error);
  if (rc) return rc;
  if (secret_len > 64) return cp__fail(error, EINVAL, "secret of %zu bytes: at most 64", secret_len);
  cp_responder *r = calloc(1, sizeof *r);
  if (!r) return cp__fail(error, ENOMEM, "out of memory");
  r->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct timeval tv = {0, 200000};
  if (r->fd < 0 || setsockopt(r->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
      bind(r->fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    int code = errno;
    if (r->fd >= 0) close(r->fd);
    free(r);
    return cp__fail(error, code, "cannot bind a probe responder to %s:%u: %s", address, port, strerror(code));
  }
  socklen_t len = sizeof addr;
  getsockname(r->fd, (struct sockaddr *)&addr, &len);
  r->port = ntohs(addr.sin_port);
  tagger_init(&r->tags, secret, secret_len);
  const char *delay = getenv("CLOUDPROFILER_RESPONDER_DELAY_US");
  if (delay && sscanf(delay, "%ld,%ld", &r->delay_before_us, &r->delay_after_us) != 2)
    fprintf(stderr, "cloudprofiler: ignoring CLOUDPROFILER_RESPONDER_DELAY_US=%s: expected <before>,<after>\n", delay);
  if (pthread_create(&r->thread, NULL, respond, r) != 0) {
    close(r->fd);
    free(r);
    return cp__fail(error, EAGAIN, "cannot start the probe responder thread");
  }
  *out = r;
  return 0;
}

uint16_t cp_responder_port(const cp_responder *r) { return r ? r->port : 0; }

void cp_responder_counts(const cp_responder *r, uint64_t *answered, uint64_t *rejected) {
  if (answered) *answered = r ? atomic_load(&r->answered) : 0;
  if (rejected) *rejected = r ? atomic_load(&r->rejected) : 0;
}

void cp_responder_stop(cp_responder *r) {
  if (!r) return;
  atomic_store(&r->stop, 1);
  shutdown(r->fd, SHUT_RDWR); /* wakes a blocked receive now, not at its 200 ms timeout */
  pthread_join(r->thread, NULL);
  close(r->fd);
  free(r);
}

/* A spinning prober waits spinning for an answer at most SPIN_FACTOR times the smallest round trip of its call so
 * far, within [SPIN_MIN_NS, SPIN_MAX_NS], then asleep. A later answer was delayed (it sets no bound), most often
 * because the responder waits for a CPU, which the spinning would hold: on 2 cores, executors probing the driver as
 * they started spun 100 ms of CPU each. Past SPIN_MAX_NS the wake-up's microseconds matter little to a round trip.
 * Before the first answer it spins SPIN_MIN_NS. */
enum { SPIN_FACTOR = 4, SPIN_MIN_NS = 50000, SPIN_MAX_NS = 200000 };

static int64_t spin_budget_ns(int64_t best_rtt_ns) {
  if (best_rtt_ns == INT64_MAX) return SPIN_MIN_NS;
  int64_t budget = SPIN_FACTOR * best_rtt_ns;
  return budget < SPIN_MIN_NS ? SPIN_MIN_NS : budget > SPIN_MAX_NS ? SPIN_MAX_NS : budget;
}

/* Waits for the answer to (seq, nonce), spinning until `spin_until` (0: not at all), then asleep; stale answers are
 * skipped. 1: answered; 0: timed out; -1: refused (an ICMP port unreachable: no process listens on the port any
 * more). */
static int await_answer(int fd, uint32_t seq, uint64_t nonce, const tagger *tags, int64_t deadline, int64_t spin_until,
                        answer *a, uint64_t *recv_tsc, uint32_t *cpu) {
  for (;;) {
    int64_t now = now_ns(), left = deadline - now;
    if (left <= 0) return 0;
    bool spin = now < spin_until;
    if (!spin) {
      struct pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, (int)(left / 1000000 + 1)) <= 0) continue;
    }
    ssize_t n = recv(fd, a, sizeof *a, spin ? MSG_DONTWAIT : 0);
    uint64_t tsc = cp_tscp(cpu);
    if (n < 0 && errno == ECONNREFUSED) return -1;
    if (n != sizeof *a) continue;
    if (a->magic != ANSWER_MAGIC || a->seq != seq || a->nonce != nonce) continue;
    if (!tag_ok(tags, a, offsetof(answer, tag), a->tag)) continue;
    *recv_tsc = tsc;
    return 1;
  }
}

int cp_probe_peer(const char *address, uint16_t port, const uint8_t *secret, size_t secret_len, uint32_t count,
                  uint32_t timeout_ms, int spin, cp_probe *out, uint32_t *answered, cp_error *error) {
  struct sockaddr_in addr;
  int rc = resolve(address, port, &addr, error);
  if (rc) return rc;
  if (!count || !out || !answered) return cp__fail(error, EINVAL, "count=%u: expected at least one probe", count);
  if (secret_len > 64) return cp__fail(error, EINVAL, "secret of %zu bytes: at most 64", secret_len);
  if (!timeout_ms || timeout_ms > 60000)
    return cp__fail(error, EINVAL, "timeout_ms=%u is out of range: expected 1 to 60000", timeout_ms);
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    int code = errno;
    if (fd >= 0) close(fd);
    return cp__fail(error, code, "cannot reach %s:%u: %s", address, port, strerror(code));
  }
  uint64_t nonce; /* random: an answer recorded from an earlier run is never taken for one of this run */
  if (getrandom(&nonce, sizeof nonce, 0) != sizeof nonce) nonce = cp_tsc() ^ ((uint64_t)getpid() << 32);
  tagger tags;
  tagger_init(&tags, secret, secret_len);
  *answered = 0;
  memset(out, 0, count * sizeof *out);
  bool refused = false;
  uint64_t slice = cp__short_slice(); /* the caller's thread: given back */
  uint32_t i = 0;                     /* after the loop: how many probes were tried */
  int64_t best_rtt_ns = INT64_MAX;
  for (uint32_t lost = 0; i < count && !refused && lost < CP_PROBE_LOSSES_MAX; i++) {
    request q = {REQUEST_MAGIC, i, nonce, {0}};
    tag_of(&tags, &q, offsetof(request, tag), q.tag);
    cp_probe *p = &out[i];
    int64_t sent_ns = now_ns();
    p->send_tsc = cp_tscp(&p->local_cpu);
    lost++;
    if (send(fd, &q, sizeof q, 0) != sizeof q) {
      refused = errno == ECONNREFUSED;
      continue;
    }
    answer a;
    uint32_t cpu;
    int64_t spin_until = spin ? sent_ns + spin_budget_ns(best_rtt_ns) : 0;
    int got =
        await_answer(fd, i, nonce, &tags, sent_ns + (int64_t)timeout_ms * 1000000, spin_until, &a, &p->recv_tsc, &cpu);
    refused = got < 0;
    if (got > 0) {
      int64_t rtt_ns = now_ns() - sent_ns;
      if (rtt_ns < best_rtt_ns) best_rtt_ns = rtt_ns;
      p->remote_tsc = a.tsc;
      p->remote_cpu = a.cpu;
      (*answered)++;
      lost = 0;
    }
  }
  close(fd);
  cp__restore_slice(slice);
  if (!*answered && refused)
    return cp__fail(error, ECONNREFUSED, "the probe responder at %s:%u refused the probes (nothing listens there)",
                    address, port);
  if (!*answered)
    return cp__fail(error, ETIMEDOUT, "no answer from the probe responder at %s:%u to %u probes within %u ms each",
                    address, port, i, timeout_ms);
  return 0;
}
