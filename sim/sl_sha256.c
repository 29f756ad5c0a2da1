/*
 * sl_sha256.c: sha256 of a file (nettle): recorded in a log's metadata so that a log names exactly
 * the weights it was measured with, and printed by `model info`.
 */
#include <errno.h>
#include <nettle/sha2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sl_common.h"

int sl_sha256_file(const char *path, char *out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return sl_fail(SL_EINPUT, "cannot open %s: %s", path, strerror(errno));
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    static __thread uint8_t buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) sha256_update(&ctx, n, buf);
    int err = ferror(f);
    fclose(f);
    if (err) return sl_fail(SL_EINPUT, "reading %s failed", path);
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_digest(&ctx, sizeof d, d);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++) sprintf(out + 2 * i, "%02x", d[i]);
    return SL_OK;
}
