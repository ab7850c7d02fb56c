/* HMAC-SHA256 of the probes' tags against RFC 4231's test cases 1, 2, 6 and 7 (short keys and data, a key longer
 * than a block, data longer than a block) and an empty key and message. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "hmac.h"

static void expect(const void *key, size_t key_len, const char *data, const char *hex) {
  uint8_t mac[CP_SHA256_BYTES];
  char got[2 * CP_SHA256_BYTES + 1];
  cp__hmac_sha256(key, key_len, data, strlen(data), mac);
  for (int i = 0; i < CP_SHA256_BYTES; i++) snprintf(got + 2 * i, 3, "%02x", mac[i]);
  if (strcmp(got, hex) != 0) fprintf(stderr, "HMAC of '%.20s...': %s, expected %s\n", data, got, hex);
  CHECK(strcmp(got, hex) == 0);
}

int main(void) {
  uint8_t key20[20], key131[131];
  memset(key20, 0x0b, sizeof key20);
  memset(key131, 0xaa, sizeof key131);
  expect(key20, sizeof key20, "Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  expect("Jefe", 4, "what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  expect(key131, sizeof key131, "Test Using Larger Than Block-Size Key - Hash Key First",
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  expect(key131, sizeof key131,
         "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be "
         "hashed before being used by the HMAC algorithm.",
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
  expect("", 0, "", "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
  printf("test_hmac: ok\n");
  return 0;
}
