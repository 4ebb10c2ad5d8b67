#!/bin/sh
# Turns on etcd's auth for roomcell (deploy/docker-compose.yml runs it once
# as etcd-init, before any node starts; it is safe to run again): a root
# user (password ETCD_ROOT_PASSWORD), a user roomcell (password
# ETCD_PASSWORD, set again on every run so a changed secret takes effect)
# whose role may read and write only under /roomcell (cluster.etcd_base_key),
# then auth enable. It talks to etcd over TLS with the etcd-root client
# certificate (CN root): once auth is on, etcd takes a verified client
# certificate's CN as the user, so that certificate is root's credential:
# it stays in deploy/tls with the CA key and is mounted into this job only.
set -eu
: "${ETCD_ROOT_PASSWORD:?set ETCD_ROOT_PASSWORD}"
: "${ETCD_PASSWORD:?set ETCD_PASSWORD}"
tls=${ETCD_TLS_DIR:-/tls}
ctl() {
	etcdctl --endpoints="${ETCD_ENDPOINT:-https://etcd:2379}" --cacert="$tls/ca.crt" \
		--cert="$tls/etcd-root.crt" --key="$tls/etcd-root.key" --dial-timeout=5s --command-timeout=10s "$@"
}
ctl user get root >/dev/null 2>&1 || ctl user add root --new-user-password="$ETCD_ROOT_PASSWORD"
ctl user grant-role root root >/dev/null 2>&1 || true
ctl role get roomcell >/dev/null 2>&1 || ctl role add roomcell
ctl role grant-permission roomcell --prefix=true readwrite /roomcell
if ctl user get roomcell >/dev/null 2>&1; then
	printf '%s\n' "$ETCD_PASSWORD" | ctl user passwd roomcell --interactive=false
else
	ctl user add roomcell --new-user-password="$ETCD_PASSWORD"
fi
ctl user grant-role roomcell roomcell >/dev/null 2>&1 || ctl user get roomcell | grep -q 'Roles: .*roomcell'
ctl auth enable
echo "etcd auth on: user roomcell may use /roomcell"
