/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): small, not fast; a probe tags 16 to 32 bytes. */
#include "hmac.h"

#include <string.h>

typedef struct {
  uint32_t h[8];
  uint8_t block[64];
  size_t used;    /* bytes in block */
  uint64_t total; /* bytes hashed so far */
} sha256;

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t rotr(uint32_t x, int n) { return x >> n | x << (32 - n); }

static void compress(sha256 *s, const uint8_t *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ w[i - 15] >> 3;
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ w[i - 2] >> 10;
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d, s->h[4] += e, s->h[5] += f, s->h[6] += g, s->h[7] += h;
}

static void sha256_init(sha256 *s) {
  static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, H0, sizeof H0);
  s->used = 0;
  s->total = 0;
}

static void sha256_update(sha256 *s, const void *data, size_t len) {
  const uint8_t *p = data;
  s->total += len;
  while (len) {
    size_t n = 64 - s->used < len ? 64 - s->used : len;
    memcpy(s->block + s->used, p, n);
    s->used += n, p += n, len -= n;
    if (s->used == 64) compress(s, s->block), s->used = 0;
  }
}

static void sha256_final(sha256 *s, uint8_t out[CP_SHA256_BYTES]) {
  uint64_t bits = s->total * 8;
  uint8_t pad[72] = {0x80};
  size_t n = (s->used < 56 ? 56 : 120) - s->used;
  for (int i = 0; i < 8; i++) pad[n + i] = (uint8_t)(bits >> (56 - 8 * i));
  sha256_update(s, pad, n + 8);
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 4; j++) out[4 * i + j] = (uint8_t)(s->h[i] >> (24 - 8 * j));
}

/* The state after one block: the key xor-ed with `pad`. */
static void padded(const uint8_t k[64], uint8_t pad, uint32_t out[8]) {
  uint8_t block[64];
  sha256 s;
  for (int i = 0; i < 64; i++) block[i] = k[i] ^ pad;
  sha256_init(&s);
  sha256_update(&s, block, 64);
  memcpy(out, s.h, sizeof s.h);
}

void cp__hmac_key_init(cp_hmac_key *out, const uint8_t *key, size_t key_len) {
  uint8_t k[64] = {0};
  if (key_len > 64) {
    sha256 s;
    sha256_init(&s);
    sha256_update(&s, key, key_len);
    sha256_final(&s, k);
  } else if (key_len) {
    memcpy(k, key, key_len);
  }
  padded(k, 0x36, out->inner);
  padded(k, 0x5c, out->outer);
}

/* A hash resumed after one block whose state was `h`. */
static void resumed(sha256 *s, const uint32_t h[8]) {
  memcpy(s->h, h, sizeof s->h);
  s->used = 0;
  s->total = 64;
}

void cp__hmac_sha256_keyed(const cp_hmac_key *k, const void *data, size_t len, uint8_t out[CP_SHA256_BYTES]) {
  sha256 s;
  uint8_t inner[CP_SHA256_BYTES];
  resumed(&s, k->inner);
  sha256_update(&s, data, len);
  sha256_final(&s, inner);
  resumed(&s, k->outer);
  sha256_update(&s, inner, sizeof inner);
  sha256_final(&s, out);
}

void cp__hmac_sha256(const uint8_t *key, size_t key_len, const void *data, size_t len, uint8_t out[CP_SHA256_BYTES]) {
  cp_hmac_key k;
  cp__hmac_key_init(&k, key, key_len);
  cp__hmac_sha256_keyed(&k, data, len, out);
}
