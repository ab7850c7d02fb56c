/* Return-trip (ReT) handlers, the paper's baseline for cross-node latency (sections 2.2 and 6.4).
 *
 * A tuple starts on node A and ends on node B. A's ret_start channel logs the start like a buffered channel
 * and listens on a UDP port; B's ret_end channel logs the end in B's own TSC domain and sends an
 * acknowledgement carrying the tuple id to A, whose listener logs its arrival into the companion channel
 * "<name>.ack". The duration is then known on A's clock alone, within [0, ack arrival - start]: the bound
 * is the whole return trip, which is what Cloudprofiler's calibration improves on. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "writers.h"

enum { ACK_MAGIC = 0x4b415043u /* "CPAK" */ };

typedef struct {
  uint32_t magic, pad;
  int64_t tuple_id;
  uint64_t tag; /* keyed tag of the fields above; 0 without a key */
} ret_ack;

struct cp_ret {
  _Atomic int fd;
  uint16_t port;
  uint8_t key[8]; /* the shared secret, 0 = none */
  bool keyed;
  cp_channel *acks; /* start side: one record per acknowledgement, at its arrival */
  _Atomic int stop;
  _Atomic uint64_t rejected, send_failures, overflows;
  pthread_t thread;
};

static uint64_t ack_tag(const cp_ret *r, const ret_ack *a) {
  return r->keyed ? cp__tag_of(r->key, sizeof r->key, a, offsetof(ret_ack, tag)) : 0;
}

static void *listen_acks(void *arg) {
  cp_ret *r = arg;
  cp__short_slice(); /* an ack's arrival is stamped when this thread wakes: on a busy core, not a slice later */
  union {
    struct cmsghdr header;
    char space[CMSG_SPACE(sizeof(uint32_t))];
  } control;
  while (!atomic_load(&r->stop)) {
    ret_ack a;
    struct iovec iov = {&a, sizeof a};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof control};
    ssize_t n = recvmsg(r->fd, &msg, MSG_TRUNC);
    uint64_t arrival = cp__tsc(); /* the arrival, before any check */
    if (n < 0) continue;          /* the receive timeout: look at the stop flag again */
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
        uint32_t dropped;
        memcpy(&dropped, CMSG_DATA(c), sizeof dropped);
        atomic_store(&r->overflows, dropped); /* the kernel's count since the socket opened */
      }
    }
    if (n != sizeof a || a.magic != ACK_MAGIC || a.tag != ack_tag(r, &a)) {
      atomic_fetch_add(&r->rejected, 1);
      continue;
    }
    cp__log_at(r->acks, a.tuple_id, arrival);
  }
  return NULL;
}

static int fail_socket(cp_ret *r, cp_error *error, const char *what, const cp_channel *ch) {
  int code = errno;
  if (r->fd >= 0) close(r->fd);
  free(r);
  return cp__fail(error, code, "%s channel '%s': cannot %s: %s", ch->kind->name, ch->name, what, strerror(code));
}

int cp__ret_open(cp_channel *ch, cp_error *error) {
  cp_ret *r = calloc(1, sizeof *r);
  if (!r) return cp__fail(error, ENOMEM, "out of memory");
  r->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (r->fd < 0) return fail_socket(r, error, "create a UDP socket", ch);
  int64_t key = ch->params[ch->kind->n_params - 1];
  memcpy(r->key, &key, sizeof r->key);
  r->keyed = key != 0;
  struct sockaddr_in addr = {.sin_family = AF_INET};
  if (ch->handler == CP_HANDLER_RET_END) {
    addr.sin_addr.s_addr = htonl((uint32_t)ch->params[0]);
    addr.sin_port = htons((uint16_t)ch->params[1]);
    if (connect(r->fd, (struct sockaddr *)&addr, sizeof addr) != 0)
      return fail_socket(r, error, "address the start node", ch);
    ch->ret = r;
    return 0;
  }
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons((uint16_t)ch->params[0]);
  struct timeval tv = {0, 100000};
  int rcvbuf = 4 << 20, one = 1; /* bursts of acknowledgements; what does not fit is dropped and counted */
  setsockopt(r->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  if (setsockopt(r->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
      setsockopt(r->fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof one) != 0 ||
      bind(r->fd, (struct sockaddr *)&addr, sizeof addr) != 0)
    return fail_socket(r, error, "listen for acknowledgements", ch);
  socklen_t len = sizeof addr;
  getsockname(r->fd, (struct sockaddr *)&addr, &len);
  r->port = ntohs(addr.sin_port);
  char ack_name[512];
  snprintf(ack_name, sizeof ack_name, "%s.ack", ch->name);
  char port[16];
  snprintf(port, sizeof port, "%u", r->port);
  const char *keys[] = {"ret.start_channel", "ret.port"};
  const char *values[] = {ch->name, port};
  r->acks = cp__channel_create(ack_name, ch->kind->companion, NULL, keys, values, 2, false, error);
  if (!r->acks) {
    close(r->fd);
    free(r);
    return error ? error->code : EIO;
  }
  if (pthread_create(&r->thread, NULL, listen_acks, r) != 0) {
    cp_channel_close(r->acks, NULL);
    unlink(r->acks->path);
    close(r->fd);
    free(r);
    return cp__fail(error, EAGAIN, "ret_start channel '%s': cannot start the listener thread", ch->name);
  }
  ch->ret = r;
  return 0;
}

void cp__ret_send(cp_channel *ch, int64_t tuple_id) {
  cp_ret *r = ch->ret;
  ret_ack a = {ACK_MAGIC, 0, tuple_id, 0};
  a.tag = ack_tag(r, &a);
  if (send(atomic_load_explicit(&r->fd, memory_order_relaxed), &a, sizeof a, MSG_DONTWAIT) != sizeof a)
    atomic_fetch_add(&r->send_failures, 1);
}

/* ret_end keeps its socket open past the close, since a cp_log racing the close may still send: see
 * cp__ret_end_release. */
void cp__ret_start_close(cp_channel *ch) {
  cp_ret *r = ch->ret;
  atomic_store(&r->stop, 1);
  pthread_join(r->thread, NULL);
  cp_channel_close(r->acks, NULL);
  close(atomic_exchange(&r->fd, -1)); /* the struct stays: counts remain readable through the never-freed channel */
}

void cp__ret_end_release(cp_channel *ch) {
  int fd = atomic_exchange(&ch->ret->fd, -1);
  if (fd >= 0) close(fd);
}

int cp_ret_info_get(const cp_channel *ch, cp_ret_info *out, cp_error *error) {
  if (!ch || !ch->ret) return cp__fail(error, EINVAL, "cp_ret_info_get: not a ret_start or ret_end channel");
  memset(out, 0, sizeof *out);
  out->port = ch->ret->port;
  out->ack_channel = ch->ret->acks;
  out->rejected = atomic_load(&ch->ret->rejected);
  out->send_failures = atomic_load(&ch->ret->send_failures);
  out->overflows = atomic_load(&ch->ret->overflows);
  return 0;
}
