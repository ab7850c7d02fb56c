/* cffi declarations of the calibration probes section of native/include/cloudprofiler.h. */
typedef struct cp_responder cp_responder;
int cp_responder_start(const char *address, uint16_t port, const uint8_t *secret, size_t secret_len,
                       cp_responder **out, cp_error *error);
uint16_t cp_responder_port(const cp_responder *responder);
void cp_responder_counts(const cp_responder *responder, uint64_t *answered, uint64_t *rejected);
void cp_responder_stop(cp_responder *responder);
typedef struct cp_probe {
  uint64_t send_tsc; uint64_t remote_tsc; uint64_t recv_tsc; uint32_t remote_cpu; uint32_t local_cpu;
} cp_probe;
int cp_probe_peer(const char *address, uint16_t port, const uint8_t *secret, size_t secret_len, uint32_t count,
                  uint32_t timeout_ms, int spin, cp_probe *out, uint32_t *answered, cp_error *error);
