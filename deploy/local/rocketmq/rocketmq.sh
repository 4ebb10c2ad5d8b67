#!/usr/bin/env bash
# A local Apache RocketMQ (one name server, one broker) for tests, on
# loopback, with ACL on (an access key and a secret key, as Tencent Cloud's
# RocketMQ is used). The release is pinned in pom.xml beside this script and
# fetched through Maven (jars only; nothing is built). services.sh runs
# `rocketmq.sh up` for the machine's shared instance; fault tests run their
# own instance (other ports, other home) with `start`, SIGKILL its broker by
# the pid file and `start` it again, and `stop` it at the end.
#
#   rocketmq.sh fetch          the jars into $ROOMCELL_ROCKETMQ_LIB (once)
#   rocketmq.sh start          write the config into the home, start the name
#                              server and the broker that are not answering
#   rocketmq.sh topic NAME...  create topics (8 queues), retrying until the
#                              broker accepts; a topic already there is kept
#   rocketmq.sh up             fetch + start + topic hyapp_room_outbox
#   rocketmq.sh stop           SIGTERM this home's processes (by pid file)
#
# Settings (environment, with defaults):
#   ROOMCELL_ROCKETMQ_HOME          /var/lib/roomcell-rocketmq/local  (conf, store, logs, pids)
#   ROOMCELL_ROCKETMQ_LIB           /var/lib/roomcell-rocketmq/lib-<version>
#   ROOMCELL_ROCKETMQ_NAMESRV_PORT  9876
#   ROOMCELL_ROCKETMQ_BROKER_PORT   10911 (the broker also listens on port-2,
#                                   its "fast" remoting port, and on port+1,
#                                   its HA port; nothing replicates here)
#   ROOMCELL_ROCKETMQ_ACCESS_KEY    roomcell
#   ROOMCELL_ROCKETMQ_SECRET_KEY    roomcell-local-secret (written to the
#                                   home's conf/ with mode 600, never printed)
# Idempotent: a name server or broker already answering on its port is left
# alone.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
VERSION=$(sed -n 's:.*<rocketmq.version>\(.*\)</rocketmq.version>.*:\1:p' "$here/pom.xml")
BASE=/var/lib/roomcell-rocketmq
RMQ_HOME=${ROOMCELL_ROCKETMQ_HOME:-$BASE/local}
RMQ_LIB=${ROOMCELL_ROCKETMQ_LIB:-$BASE/lib-$VERSION}
NAMESRV_PORT=${ROOMCELL_ROCKETMQ_NAMESRV_PORT:-9876}
BROKER_PORT=${ROOMCELL_ROCKETMQ_BROKER_PORT:-10911}
ACCESS_KEY=${ROOMCELL_ROCKETMQ_ACCESS_KEY:-roomcell}
SECRET_KEY=${ROOMCELL_ROCKETMQ_SECRET_KEY:-roomcell-local-secret}

say() { echo "rocketmq: $*" >&2; }
up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() { # wait_port NAME PORT SECONDS PIDFILE
  local i
  for i in $(seq 1 $(($3 * 5))); do
    if up "$2"; then return 0; fi
    if [ -f "$4" ] && ! kill -0 "$(cat "$4")" 2>/dev/null; then
      say "$1 exited before listening on 127.0.0.1:$2; its log: $RMQ_HOME/$1.out"
      tail -n 20 "$RMQ_HOME/$1.out" | grep -v '|-' >&2 || true
      return 1
    fi
    sleep 0.2
  done
  say "$1 did not come up on 127.0.0.1:$2 within $3 s; its log: $RMQ_HOME/$1.out"
  return 1
}

need_java() {
  command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 && return 0
  if [ "$(id -u)" != 0 ]; then say "java and mvn are needed and I am not root to install them"; return 1; fi
  say "installing Java and Maven"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless maven >/dev/null
}

fetch() {
  [ -f "$RMQ_LIB/rocketmq-broker-$VERSION.jar" ] && [ -f "$RMQ_LIB/.complete" ] && return 0
  need_java
  say "fetching Apache RocketMQ $VERSION (name server, broker, tools) through Maven into $RMQ_LIB"
  mkdir -p "$RMQ_LIB"
  # Maven's target/ would land beside the pom; keep the checkout clean.
  local work
  work=$(mktemp -d)
  cp "$here/pom.xml" "$work/"
  (cd "$work" && mvn -B -q dependency:copy-dependencies -DoutputDirectory="$RMQ_LIB" -DincludeScope=runtime)
  rm -rf "$work"
  touch "$RMQ_LIB/.complete"
}

# The JVMs: small heaps (the shared machine has 2 cores and runs the
# suite beside them); user.home is the home, where RocketMQ writes its logs.
# The --add-* flags let the store unmap its files on Java 17: a broker
# recovering from a crash (SIGKILL, power loss) cleans mapped buffers and
# dies without them (IllegalAccessError on sun.nio.ch.DirectBuffer).
JAVA_OPENS="--add-exports=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED"
jvm() { # jvm NAME HEAP MAIN ARGS...
  local name=$1 heap=$2 main=$3
  shift 3
  cd "$RMQ_HOME"
  # shellcheck disable=SC2086
  setsid nohup java $JAVA_OPENS -Xms"$heap" -Xmx"$heap" -XX:MaxDirectMemorySize=256m -XX:+UseG1GC \
    -Duser.home="$RMQ_HOME" -Drocketmq.home.dir="$RMQ_HOME" \
    -cp "$RMQ_LIB/*" "$main" "$@" >"$RMQ_HOME/$name.out" 2>&1 </dev/null &
  echo $! >"$RMQ_HOME/$name.pid"
  cd - >/dev/null
}

write_conf() {
  mkdir -p "$RMQ_HOME/conf" "$RMQ_HOME/store"
  umask 077
  # ACL 1.0: one admin account (every topic and group). The broker
  # rereads the file when it changes.
  cat >"$RMQ_HOME/conf/plain_acl.yml" <<EOF
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: $ACCESS_KEY
    secretKey: $SECRET_KEY
    whiteRemoteAddress:
    admin: true
EOF
  # The admin tool signs its requests with these.
  cat >"$RMQ_HOME/conf/tools.yml" <<EOF
accessKey: $ACCESS_KEY
secretKey: $SECRET_KEY
EOF
  umask 022
  cat >"$RMQ_HOME/namesrv.conf" <<EOF
listenPort=$NAMESRV_PORT
bindAddress=127.0.0.1
EOF
  # autoCreateTopicEnable=false: a topic that is not created is an error
  # the producer sees, as on a managed cluster. The send queue wait and the
  # page-cache busy limit are raised from 200 ms / 1 s because this machine
  # is shared and loaded: the broker would otherwise refuse sends with
  # "system busy" while the suite runs beside it.
  cat >"$RMQ_HOME/broker.conf" <<EOF
brokerClusterName=roomcell
brokerName=roomcell-broker
brokerId=0
namesrvAddr=127.0.0.1:$NAMESRV_PORT
brokerIP1=127.0.0.1
bindAddress=127.0.0.1
listenPort=$BROKER_PORT
storePathRootDir=$RMQ_HOME/store
storePathCommitLog=$RMQ_HOME/store/commitlog
aclEnable=true
autoCreateTopicEnable=false
autoCreateSubscriptionGroup=true
mappedFileSizeCommitLog=67108864
flushDiskType=ASYNC_FLUSH
fileReservedTime=24
waitTimeMillsInSendQueue=3000
osPageCacheBusyTimeOutMills=5000
EOF
}

# The broker refuses every send once the disk holding its store is 90%
# full (diskSpaceWarningLevelRatio): "service not available now ... the
# broker's disk is full". Say so at start instead of leaving the tests to
# time out on it.
check_disk() {
  local used
  used=$(df -P "$RMQ_HOME" | awk 'NR == 2 { sub("%", "", $5); print $5 }')
  if [ -n "$used" ] && [ "$used" -ge 90 ]; then
    say "the disk holding $RMQ_HOME is ${used}% full; the broker refuses every send at 90%: free space (the Go build cache: go clean -cache)"
    exit 1
  fi
}

start() {
  fetch
  mkdir -p "$RMQ_HOME"
  check_disk
  write_conf
  if ! up "$NAMESRV_PORT"; then
    say "starting the name server on 127.0.0.1:$NAMESRV_PORT"
    jvm namesrv 128m org.apache.rocketmq.namesrv.NamesrvStartup -c "$RMQ_HOME/namesrv.conf"
  fi
  if ! up "$BROKER_PORT"; then
    # The broker registers with the name server at start.
    wait_port namesrv "$NAMESRV_PORT" 180 "$RMQ_HOME/namesrv.pid"
    say "starting the broker on 127.0.0.1:$BROKER_PORT"
    jvm broker 384m org.apache.rocketmq.broker.BrokerStartup -c "$RMQ_HOME/broker.conf"
  fi
  wait_port namesrv "$NAMESRV_PORT" 180 "$RMQ_HOME/namesrv.pid"
  wait_port broker "$BROKER_PORT" 180 "$RMQ_HOME/broker.pid"
}

topic() {
  local t i
  for t in "$@"; do
    # The broker keeps its topics in store/config/topics.json: a topic
    # there was created before (the store survives restarts).
    if grep -q "\"$t\"" "$RMQ_HOME/store/config/topics.json" 2>/dev/null; then continue; fi
    for i in $(seq 1 30); do
      if java -Xmx128m -XX:TieredStopAtLevel=1 -Duser.home="$RMQ_HOME" -Drocketmq.home.dir="$RMQ_HOME" \
        -cp "$RMQ_LIB/*" \
        org.apache.rocketmq.tools.command.MQAdminStartup updateTopic -n "127.0.0.1:$NAMESRV_PORT" -c roomcell \
        -t "$t" -r 8 -w 8 >"$RMQ_HOME/mqadmin.out" 2>&1; then
        say "topic $t ready"
        continue 2
      fi
      sleep 2 # the broker has not registered with the name server yet
    done
    say "could not create topic $t; the admin tool said:"
    grep -v '|-' "$RMQ_HOME/mqadmin.out" | tail -n 20 >&2
    return 1
  done
}

stop() {
  local n
  for n in broker namesrv; do
    [ -f "$RMQ_HOME/$n.pid" ] || continue
    kill "$(cat "$RMQ_HOME/$n.pid")" 2>/dev/null || true
    rm -f "$RMQ_HOME/$n.pid"
  done
}

case "${1:-up}" in
fetch) fetch ;;
start) start ;;
topic) shift; topic "$@" ;;
up) start; topic hyapp_room_outbox ;;
stop) stop ;;
*) say "usage: $0 fetch|start|topic NAME...|up|stop"; exit 2 ;;
esac
