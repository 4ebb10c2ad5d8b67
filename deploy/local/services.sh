#!/usr/bin/env bash
# Brings up the servers the test suite talks to, on loopback: MariaDB
# (two instances: :3306, and :3307 for a second room database), Redis, NATS (JetStream) and etcd. A server already answering is left
# alone; a missing one is installed from Debian's packages first, as are the
# network tools the partition test needs (nft, iptables). Idempotent.
set -euo pipefail

ETCD_CLIENT_PORT=${ROOMCELL_ETCD_PORT:-23790}
ETCD_PEER_PORT=$((ETCD_CLIENT_PORT + 10))
ETCD_DIR=${ROOMCELL_ETCD_DIR:-/tmp/roomcell-etcd}

up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  local name=$1 port=$2
  for _ in $(seq 1 150); do
    if up "$port"; then return 0; fi
    sleep 0.2
  done
  echo "services: $name did not come up on 127.0.0.1:$port" >&2
  return 1
}

apt_updated=0
need() { # need BINARY PACKAGE
  command -v "$1" >/dev/null 2>&1 && return 0
  [ -x "$1" ] && return 0
  if [ "$(id -u)" != 0 ]; then echo "services: $2 is missing and I am not root to install it" >&2; return 1; fi
  if [ $apt_updated = 0 ]; then apt-get update -qq; apt_updated=1; fi
  echo "services: installing $2"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}

# The network-partition test (cluster/clustertest, partition_test.go) puts
# each node in its own network namespace and cuts one off with nft rules;
# iptables comes along for operators who prefer it to inspect the rules.
need nft nftables
need iptables iptables
need promtool prometheus   # promtool: the alert rules' unit tests (deploy/prometheus)

if ! up 3306; then
  need /usr/sbin/mariadbd mariadb-server
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
  # mariadbd refuses to run as root; Debian's service wrapper passes the
  # user, and on a machine without systemd we do.
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql
  wait_port MariaDB 3306
  # Debian's fresh install lets root in over the socket only; the tests
  # connect as root with an empty password over 127.0.0.1. Checked on every
  # server this script starts (an install whose first start failed is
  # still fresh the next time).
  if ! mariadb -h127.0.0.1 -uroot -e 'SELECT 1' >/dev/null 2>&1; then
    mariadb -uroot -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('');
      CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION; FLUSH PRIVILEGES;"
  fi
fi

# A second MariaDB, for rooms across several databases (mysql.room_dbs,
# docs/cluster.md "Room databases"): its own data directory and port,
# root without a password over 127.0.0.1 as on the first. The pid file
# tells start-stop-daemon it from the first mariadbd.
MARIADB2_PORT=${ROOMCELL_MARIADB2_PORT:-3307}
MARIADB2_DIR=${ROOMCELL_MARIADB2_DIR:-/var/lib/roomcell-mariadb2}
if ! up "$MARIADB2_PORT"; then
  need /usr/sbin/mariadbd mariadb-server
  mkdir -p "$MARIADB2_DIR" && chown mysql:mysql "$MARIADB2_DIR"
  if [ ! -d "$MARIADB2_DIR/data/mysql" ]; then
    mariadb-install-db --no-defaults --user=mysql --datadir="$MARIADB2_DIR/data" \
      --auth-root-authentication-method=normal --skip-test-db >"$MARIADB2_DIR/install.log" 2>&1
  fi
  start-stop-daemon --start --oknodo --background --pidfile "$MARIADB2_DIR/mariadbd.pid" --exec /usr/sbin/mariadbd -- \
    --no-defaults --user=mysql --datadir="$MARIADB2_DIR/data" --port="$MARIADB2_PORT" --bind-address=127.0.0.1 \
    --socket="$MARIADB2_DIR/mariadbd.sock" --pid-file="$MARIADB2_DIR/mariadbd.pid" --log-error="$MARIADB2_DIR/error.log"
  wait_port "MariaDB (second)" "$MARIADB2_PORT"
  if ! mariadb -h127.0.0.1 -P"$MARIADB2_PORT" -uroot -e 'SELECT 1' >/dev/null 2>&1; then
    mariadb -uroot -S "$MARIADB2_DIR/mariadbd.sock" -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
      GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION; FLUSH PRIVILEGES;"
  fi
fi

if ! up 6379; then
  need redis-server redis-server
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_port Redis 6379
fi

if ! up 4222; then
  need /usr/sbin/nats-server nats-server
  mkdir -p /var/lib/nats-server
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  wait_port NATS 4222
fi

if ! up "$ETCD_CLIENT_PORT"; then
  need etcd etcd-server
  mkdir -p "$ETCD_DIR"
  nohup etcd --name roomcell-test --data-dir "$ETCD_DIR" \
    --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "roomcell-test=http://127.0.0.1:$ETCD_PEER_PORT" >"$ETCD_DIR.log" 2>&1 &
  wait_port etcd "$ETCD_CLIENT_PORT"
fi
echo "services: MariaDB :3306 and :$MARIADB2_PORT, Redis :6379, NATS :4222, etcd :$ETCD_CLIENT_PORT up"

# --- RocketMQ ---------------------------------------------------------------
# Seed 003's production message queue: Apache RocketMQ (pinned in
# deploy/local/rocketmq/pom.xml, fetched through Maven, run on Java), one
# name server on :9876 and one broker on :10911 (also :10909, and its HA
# port :10912), ACL on with the access key "roomcell". A name server or
# broker already answering is left alone; the topic hyapp_room_outbox is
# created once. The tests of delivery/mq/rocketmq use it (and start
# instances of their own for fault tests). deploy/local/rocketmq/rocketmq.sh
# says how.
"$(dirname "$0")/rocketmq/rocketmq.sh" up
echo "services: RocketMQ name server :${ROOMCELL_ROCKETMQ_NAMESRV_PORT:-9876}, broker :${ROOMCELL_ROCKETMQ_BROKER_PORT:-10911} up"
