#include "CAuthCryptoShims.h"

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/obj_mac.h>

int auth_crypto_ecdsa_der_to_raw(const uint8_t *der, size_t der_len, size_t scalar_len,
                                 uint8_t *out) {
    if (der == NULL || out == NULL || der_len == 0 || der_len > 1024 || scalar_len == 0) {
        return 0;
    }
    const unsigned char *cursor = der;
    ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &cursor, (long)der_len);
    if (sig == NULL) {
        return 0;
    }
    int ok = 0;
    // Trailing bytes after the DER structure mean the input was not one signature.
    if (cursor == der + der_len) {
        const BIGNUM *r = NULL;
        const BIGNUM *s = NULL;
        ECDSA_SIG_get0(sig, &r, &s);
        if (r != NULL && s != NULL
            && BN_bn2binpad(r, out, (int)scalar_len) == (int)scalar_len
            && BN_bn2binpad(s, out + scalar_len, (int)scalar_len) == (int)scalar_len) {
            ok = 1;
        }
    }
    ECDSA_SIG_free(sig);
    return ok;
}

int auth_crypto_ecdsa_raw_to_der(const uint8_t *raw, size_t scalar_len, uint8_t *out,
                                 size_t *out_len) {
    if (raw == NULL || out == NULL || out_len == NULL || scalar_len == 0 || scalar_len > 256) {
        return 0;
    }
    BIGNUM *r = BN_bin2bn(raw, (int)scalar_len, NULL);
    BIGNUM *s = BN_bin2bn(raw + scalar_len, (int)scalar_len, NULL);
    ECDSA_SIG *sig = ECDSA_SIG_new();
    if (r == NULL || s == NULL || sig == NULL || BN_is_zero(r) || BN_is_zero(s)) {
        BN_free(r);
        BN_free(s);
        ECDSA_SIG_free(sig);
        return 0;
    }
    // ECDSA_SIG_set0 takes ownership of r and s.
    if (ECDSA_SIG_set0(sig, r, s) != 1) {
        BN_free(r);
        BN_free(s);
        ECDSA_SIG_free(sig);
        return 0;
    }
    int ok = 0;
    int needed = i2d_ECDSA_SIG(sig, NULL);
    if (needed > 0 && (size_t)needed <= *out_len) {
        unsigned char *cursor = out;
        if (i2d_ECDSA_SIG(sig, &cursor) == needed) {
            *out_len = (size_t)needed;
            ok = 1;
        }
    }
    ECDSA_SIG_free(sig);
    return ok;
}

int auth_crypto_p256_public_from_private(const uint8_t *d, uint8_t *out) {
    if (d == NULL || out == NULL) {
        return 0;
    }
    int ok = 0;
    EC_GROUP *group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    BIGNUM *scalar = BN_secure_new();
    EC_POINT *point = NULL;
    BN_CTX *bn_ctx = BN_CTX_new();
    if (group == NULL || scalar == NULL || bn_ctx == NULL) {
        goto done;
    }
    if (BN_bin2bn(d, 32, scalar) == NULL) {
        goto done;
    }
    const BIGNUM *order = EC_GROUP_get0_order(group);
    if (BN_is_zero(scalar) || order == NULL || BN_cmp(scalar, order) >= 0) {
        goto done;
    }
    point = EC_POINT_new(group);
    if (point == NULL || EC_POINT_mul(group, point, scalar, NULL, NULL, bn_ctx) != 1) {
        goto done;
    }
    if (EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, out, 65, bn_ctx) != 65) {
        goto done;
    }
    ok = 1;
done:
    EC_POINT_free(point);
    BN_CTX_free(bn_ctx);
    BN_clear_free(scalar);
    EC_GROUP_free(group);
    return ok;
}
