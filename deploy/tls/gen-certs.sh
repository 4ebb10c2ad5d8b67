#!/bin/sh
# Makes the certificates deploy/docker-compose.yml mounts from deploy/tls:
# a private CA (ca.crt; its key ca.key stays here, keep it out of the
# containers) and, signed by it (ECDSA P-256 keys throughout):
#   tls.crt/tls.key                 roomcell's gRPC server (localhost, the node names)
#   etcd.crt/etcd.key               the etcd members' server (etcd, etcd-2, etcd-3, localhost, 127.0.0.1)
#   etcd-client.crt/etcd-client.key roomcell's client certificate for etcd (CN roomcell)
#   etcd-root.crt/etcd-root.key     the etcd-init job's client certificate (CN root)
#   nats.crt/nats.key               NATS's server (nats, localhost, 127.0.0.1)
#   nats-client.crt/nats-client.key roomcell's client certificate for NATS (CN roomcell)
# Usage: sh deploy/tls/gen-certs.sh [dir] (default: this script's folder).
# Existing files are kept: delete them to make new ones. The roomcell
# nodes mount the whole folder and run as uid 10001, so the keys they use
# (tls, etcd-client, nats-client) are readable by everyone in dir; the
# others (ca.key, etcd-root.key and the etcd and NATS server keys, read
# by containers running as root) are the owner's only. Keep dir private
# on a shared host. For production use your own CA and keys.
set -eu
dir=${1:-$(dirname "$0")}
days=${DAYS:-365}
cd "$dir"
umask 022
if [ ! -f ca.crt ]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days "$days" -subj "/CN=roomcell compose CA" \
		-keyout ca.key -out ca.crt 2>/dev/null
	chmod 600 ca.key
fi
# cert NAME CN USAGE SAN MODE: a key (MODE) and a certificate signed by
# the CA.
cert() {
	[ -f "$1.crt" ] && return 0
	ext=$(mktemp)
	printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n' "$3" >"$ext"
	[ -n "$4" ] && printf 'subjectAltName=%s\n' "$4" >>"$ext"
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
	openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" -extfile "$ext" -out "$1.crt" 2>/dev/null
	rm -f "$1.csr" "$ext"
	chmod "$5" "$1.key"
}
cert tls roomcell serverAuth "DNS:localhost,DNS:roomcell-1,DNS:roomcell-2,DNS:roomcell-3,DNS:roomcell-notice,IP:127.0.0.1" 644
cert etcd etcd serverAuth,clientAuth "DNS:etcd,DNS:etcd-2,DNS:etcd-3,DNS:localhost,IP:127.0.0.1" 600
cert etcd-client roomcell clientAuth "" 644
cert etcd-root root clientAuth "" 600
cert nats nats serverAuth "DNS:nats,DNS:localhost,IP:127.0.0.1" 600
cert nats-client roomcell clientAuth "" 644
echo "certificates in $(pwd)"
