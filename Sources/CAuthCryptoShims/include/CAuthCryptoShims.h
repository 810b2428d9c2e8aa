#pragma once

// Wrappers for the parts of OpenSSL 3 that do not import into Swift (function-like macros,
// multi-line selection macros) and for two small conversions that are much shorter in C than
// through Swift pointer juggling. Every symbol is prefixed `auth_crypto_`.

#include <stddef.h>
#include <stdint.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#ifdef __cplusplus
extern "C" {
#endif

/// OPENSSL_free (a macro).
static inline void auth_crypto_free(void *ptr) { OPENSSL_free(ptr); }

/// OPENSSL_clear_free (a macro): zeroes `len` bytes, then frees.
static inline void auth_crypto_clear_free(void *ptr, size_t len) { OPENSSL_clear_free(ptr, len); }

/// EVP_PKEY_PUBLIC_KEY (a multi-line macro): the selection for public-key import and export.
static inline int auth_crypto_selection_public_key(void) { return EVP_PKEY_PUBLIC_KEY; }

/// EVP_PKEY_KEYPAIR (a multi-line macro): the selection for key-pair import and export.
static inline int auth_crypto_selection_keypair(void) { return EVP_PKEY_KEYPAIR; }

/// Converts a DER-encoded ECDSA-Sig-Value into fixed-width big-endian r||s
/// (`2 * scalar_len` bytes written to `out`). Returns 1 on success, 0 on malformed input or
/// when r or s does not fit in `scalar_len` bytes.
int auth_crypto_ecdsa_der_to_raw(const uint8_t *der, size_t der_len, size_t scalar_len,
                                 uint8_t *out);

/// Converts fixed-width big-endian r||s (`2 * scalar_len` bytes) into a DER-encoded
/// ECDSA-Sig-Value. On entry `*out_len` is the capacity of `out`; on success it is set to the
/// encoded length and 1 is returned. Returns 0 on failure (including r or s equal to zero).
int auth_crypto_ecdsa_raw_to_der(const uint8_t *raw, size_t scalar_len, uint8_t *out,
                                 size_t *out_len);

/// Computes the uncompressed public point (0x04 || X || Y, 65 bytes) of the P-256 private
/// scalar `d` (32 bytes, big-endian). Returns 1 on success, 0 if d is zero or not below the
/// group order, or on allocation failure.
int auth_crypto_p256_public_from_private(const uint8_t *d, uint8_t *out);

#ifdef __cplusplus
}
#endif
