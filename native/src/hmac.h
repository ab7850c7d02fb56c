/* HMAC-SHA256 (RFC 2104 over FIPS 180-4), for the tags of calibration probes (probe.c). Nothing here is public
 * API. */
#ifndef CP_HMAC_H
#define CP_HMAC_H

#include <stddef.h>
#include <stdint.h>

#define CP_SHA256_BYTES 32

/* A key made ready: the hash states after its inner and outer pads, so that a MAC of a short message costs two
 * SHA-256 blocks instead of four (a probe's round trip includes two MACs). */
typedef struct cp_hmac_key {
  uint32_t inner[8], outer[8];
} cp_hmac_key;

/* key of any length (longer than 64 bytes: its hash is the key). */
__attribute__((visibility("hidden"))) void cp__hmac_key_init(cp_hmac_key *k, const uint8_t *key, size_t key_len);

/* out = HMAC-SHA256(key, data). */
__attribute__((visibility("hidden"))) void cp__hmac_sha256_keyed(const cp_hmac_key *k, const void *data, size_t len,
                                                                 uint8_t out[CP_SHA256_BYTES]);

/* out = HMAC-SHA256(key, data), the key made ready on the way. */
__attribute__((visibility("hidden"))) void cp__hmac_sha256(const uint8_t *key, size_t key_len, const void *data,
                                                           size_t len, uint8_t out[CP_SHA256_BYTES]);

#endif
