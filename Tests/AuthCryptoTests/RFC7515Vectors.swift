// Examples from RFC 7515 (JSON Web Signature), Appendix A, with the RFC's line breaks removed.
enum RFC7515 {
    /// The JWS Payload of Appendix A.1–A.4 (Figure 7's bytes: note the CR LF pairs).
    static let payload = utf8("{\"iss\":\"joe\",\r\n \"exp\":1300819380,\r\n \"http://example.com/is_root\":true}")
    static let encodedPayload =
        "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"

    /// Appendix A.1: HS256 with the JWS Protected Header {"typ":"JWT",\r\n "alg":"HS256"}.
    static let hs256Token =
        "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.\(encodedPayload).dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"

    /// Appendix A.2.1: the RSA key (public members).
    static let rsaN =
        "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ"
    static let rsaE = "AQAB"
    /// Appendix A.2.1: the RS256 JWS Compact Serialization (header {"alg":"RS256"}).
    static let rs256Token =
        "eyJhbGciOiJSUzI1NiJ9.\(encodedPayload).cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw"

    /// Appendix A.3.1: the P-256 key.
    static let ecX = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"
    static let ecY = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"
    static let ecD = "jpsQnnGQmL-YBIffH1136cspYG6-0iY7X1fCE9-E9LI"
    /// Appendix A.3.1: the ES256 JWS Compact Serialization (header {"alg":"ES256"}).
    static let es256Token =
        "eyJhbGciOiJFUzI1NiJ9.\(encodedPayload).DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q"

    /// Appendix A.3.1's key as a public JWK, as Figure 21 prints it without `d`.
    static let ecJWKJSON = """
        {"kty":"EC",
         "crv":"P-256",
         "x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
         "y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0",
         "d":"jpsQnnGQmL-YBIffH1136cspYG6-0iY7X1fCE9-E9LI"
        }
        """
}
