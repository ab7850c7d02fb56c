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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"

enum { ACK_MAGIC = 0x4b415043u /* "CPAK" */ };

typedef struct {
  uint32_t magic, pad;
  int64_t tuple_id;
} ret_ack;

struct cp_ret {
  int fd;
  uint16_t port;
  cp_channel *acks; /* start side: one record per acknowledgement, at its arrival */
  _Atomic int stop;
  _Atomic uint64_t rejected, send_failures;
  pthread_t thread;
  bool listening;
};

static void *listen_acks(void *arg) {
  cp_ret *r = arg;
  while (!atomic_load(&r->stop)) {
    ret_ack a;
    ssize_t n = recv(r->fd, &a, sizeof a, 0);
    if (n < 0) continue; /* the receive timeout: look at the stop flag again */
    if (n != sizeof a || a.magic != ACK_MAGIC) {
      atomic_fetch_add(&r->rejected, 1);
      continue;
    }
    cp_log(r->acks, a.tuple_id);
  }
  return NULL;
}

static int fail_socket(cp_ret *r, cp_error *error, const char *what, const cp_channel *ch) {
  int code = errno;
  if (r->fd >= 0) close(r->fd);
  free(r);
  return cp__fail(error, code, "%s channel '%s': cannot %s: %s", cp_handler_name(ch->handler), ch->name, what,
                  strerror(code));
}

int cp__ret_open(cp_channel *ch, cp_error *error) {
  cp_ret *r = calloc(1, sizeof *r);
  if (!r) return cp__fail(error, ENOMEM, "out of memory");
  r->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (r->fd < 0) return fail_socket(r, error, "create a UDP socket", ch);
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
  int rcvbuf = 4 << 20; /* bursts of acknowledgements: the kernel drops what does not fit, uncounted */
  setsockopt(r->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  if (setsockopt(r->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
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
  r->acks = cp_channel_open(ack_name, CP_HANDLER_BUFFERED, NULL, 0, keys, values, 2, error);
  if (!r->acks) {
    close(r->fd);
    free(r);
    return error ? error->code : EIO;
  }
  if (pthread_create(&r->thread, NULL, listen_acks, r) != 0) {
    cp_channel_close(r->acks, NULL);
    close(r->fd);
    free(r);
    return cp__fail(error, EAGAIN, "ret_start channel '%s': cannot start the listener thread", ch->name);
  }
  r->listening = true;
  ch->ret = r;
  return 0;
}

void cp__ret_send(cp_channel *ch, int64_t tuple_id) {
  ret_ack a = {ACK_MAGIC, 0, tuple_id};
  if (send(ch->ret->fd, &a, sizeof a, MSG_DONTWAIT) != sizeof a) atomic_fetch_add(&ch->ret->send_failures, 1);
}

void cp__ret_close(cp_channel *ch) {
  cp_ret *r = ch->ret;
  if (!r) return;
  if (r->listening) {
    atomic_store(&r->stop, 1);
    pthread_join(r->thread, NULL);
    cp_channel_close(r->acks, NULL);
  }
  close(r->fd);
  r->fd = -1; /* the struct stays: counts remain readable through the never-freed channel */
}

int cp_ret_info_get(const cp_channel *ch, cp_ret_info *out, cp_error *error) {
  if (!ch || (ch->handler != CP_HANDLER_RET_START && ch->handler != CP_HANDLER_RET_END) || !ch->ret)
    return cp__fail(error, EINVAL, "cp_ret_info_get: not a ret_start or ret_end channel");
  memset(out, 0, sizeof *out);
  out->port = ch->ret->port;
  out->ack_channel = ch->ret->acks;
  out->rejected = atomic_load(&ch->ret->rejected);
  out->send_failures = atomic_load(&ch->ret->send_failures);
  return 0;
}
