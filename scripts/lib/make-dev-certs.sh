#!/usr/bin/env bash
# Makes a development CA and one certificate per name, for mutual TLS between the services
# (docs/protocol.md §1, docs/deployment.md). Usage: make-dev-certs.sh DIR NAME...
#   DIR/ca.pem, DIR/ca.key          the CA (kept if it exists, so certificates stay compatible)
#   DIR/NAME.pem, DIR/NAME.key      a certificate whose subjectAltName is DNS:NAME (the service
#                                   name the transport reads), for both server and client use
# Existing certificates are kept. EC P-256 keys; the CA lasts 10 years, certificates 2 years.
# Needs the openssl command-line tool.
set -euo pipefail

dir="${1:?usage: make-dev-certs.sh DIR NAME...}"
shift
command -v openssl >/dev/null || { echo "make-dev-certs: the openssl command is required" >&2; exit 1; }
mkdir -p "$dir"
chmod 700 "$dir"

if [ ! -f "$dir/ca.pem" ] || [ ! -f "$dir/ca.key" ]; then
    openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
        -keyout "$dir/ca.key" -out "$dir/ca.pem" -days 3650 -subj "/CN=auth-backend development CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi

for name in "$@"; do
    [ -f "$dir/$name.pem" ] && [ -f "$dir/$name.key" ] && continue
    extensions="$(mktemp)"
    printf '%s\n' "subjectAltName=DNS:$name" "extendedKeyUsage=serverAuth,clientAuth" \
        "keyUsage=critical,digitalSignature" "basicConstraints=critical,CA:FALSE" > "$extensions"
    openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
        -keyout "$dir/$name.key" -out "$dir/$name.csr" -subj "/CN=$name" 2>/dev/null
    openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
        -out "$dir/$name.pem" -days 730 -extfile "$extensions" 2>/dev/null
    rm -f "$dir/$name.csr" "$extensions"
done
chmod 600 "$dir"/*.key
