# shellcheck shell=bash disable=SC2015,SC2034
# Helpers shared by infra/kafka/{start,stop,status}. Sourced, not executed.

KAFKA_INFRA_DIR="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)"
LIB_DIR="$KAFKA_INFRA_DIR/lib"
PROBE_DIR="$LIB_DIR/probe"

die() { echo "kafka: error: $*" >&2; exit 1; }
note() { echo "kafka: $*" >&2; }

usage() {
  cat >&2 <<USAGE
usage: $1 [--port N] [--controller-port N] [--data-dir DIR] [--heap SIZE]${2:+ $2}
  env: RLLM_KAFKA_PORT (9092), RLLM_KAFKA_CONTROLLER_PORT (port+1),
       RLLM_KAFKA_DATA_DIR (\$HOME/.rllm/kafka), RLLM_KAFKA_HEAP (512m),
       RLLM_KAFKA_START_TIMEOUT (60 s), RLLM_KAFKA_STOP_TIMEOUT (30 s),
       RLLM_KAFKA_JVM_OPTS (extra JVM flags for the broker);
       a cluster's node (set by infra/kafka/cluster): RLLM_KAFKA_NODE_ID (1),
       RLLM_KAFKA_VOTERS (1@127.0.0.1:controller-port), RLLM_KAFKA_REPLICATION (1),
       RLLM_KAFKA_MIN_ISR (1), RLLM_KAFKA_CLUSTER_ID (random at the first format)
USAGE
}

# parse_args SCRIPT_NAME ALLOW_PURGE(0|1) "$@"  -> PORT CONTROLLER_PORT DATA_DIR HEAP PURGE
parse_args() {
  local name=$1 allow_purge=$2; shift 2
  PORT=${RLLM_KAFKA_PORT:-9092}
  CONTROLLER_PORT=${RLLM_KAFKA_CONTROLLER_PORT:-}
  DATA_DIR=${RLLM_KAFKA_DATA_DIR:-${HOME:-/root}/.rllm/kafka}
  HEAP=${RLLM_KAFKA_HEAP:-512m}
  PURGE=0
  while (($#)); do
    case $1 in
      --port) PORT=${2:?--port needs a value}; shift 2 ;;
      --controller-port) CONTROLLER_PORT=${2:?--controller-port needs a value}; shift 2 ;;
      --data-dir) DATA_DIR=${2:?--data-dir needs a value}; shift 2 ;;
      --heap) HEAP=${2:?--heap needs a value}; shift 2 ;;
      --purge) ((allow_purge)) || { usage "$name"; exit 2; }; PURGE=1; shift ;;
      -h|--help) usage "$name" "$( ((allow_purge)) && echo '[--purge]')"; exit 0 ;;
      *) echo "kafka: unknown argument: $1" >&2; usage "$name"; exit 2 ;;
    esac
  done
  [[ $PORT =~ ^[0-9]+$ ]] && ((PORT > 0 && PORT < 65536)) || die "bad port: $PORT"
  CONTROLLER_PORT=${CONTROLLER_PORT:-$((PORT + 1))}
  [[ $CONTROLLER_PORT =~ ^[0-9]+$ ]] && ((CONTROLLER_PORT > 0 && CONTROLLER_PORT < 65536)) \
    || die "bad controller port: $CONTROLLER_PORT"
  ((PORT != CONTROLLER_PORT)) || die "broker and controller ports must differ ($PORT)"
  [[ $HEAP =~ ^[0-9]+[kKmMgG]?$ ]] || die "bad heap size: $HEAP (e.g. 512m)"
  [[ -n $DATA_DIR ]] || die "empty data dir"
  NODE_ID=${RLLM_KAFKA_NODE_ID:-1}
  [[ $NODE_ID =~ ^[0-9]+$ ]] || die "bad node id: $NODE_ID (RLLM_KAFKA_NODE_ID)"
  VOTERS=${RLLM_KAFKA_VOTERS:-$NODE_ID@127.0.0.1:$CONTROLLER_PORT}
  [[ $VOTERS =~ ^[0-9]+@[^,:]+:[0-9]+(,[0-9]+@[^,:]+:[0-9]+)*$ ]] \
    || die "bad controller voters: $VOTERS (RLLM_KAFKA_VOTERS, e.g. 1@127.0.0.1:9093,2@127.0.0.1:9095)"
  REPLICATION=${RLLM_KAFKA_REPLICATION:-1}
  MIN_ISR=${RLLM_KAFKA_MIN_ISR:-1}
  [[ $REPLICATION =~ ^[1-9][0-9]*$ && $MIN_ISR =~ ^[1-9][0-9]*$ ]] && ((MIN_ISR <= REPLICATION)) \
    || die "bad replication $REPLICATION / min in-sync replicas $MIN_ISR (RLLM_KAFKA_REPLICATION, RLLM_KAFKA_MIN_ISR)"
  DATA_DIR=$(realpath -m -- "$DATA_DIR")

  CONFIG_FILE="$DATA_DIR/server.properties"
  PID_FILE="$DATA_DIR/kafka.pid"
  LOG_DIR="$DATA_DIR/logs"
  LOG_FILE="$LOG_DIR/server.log"
  OUT_FILE="$LOG_DIR/kafka.out"
  KAFKA_LOG_DIRS="$DATA_DIR/data"
  META_FILE="$KAFKA_LOG_DIRS/meta.properties"
}

need_java() {
  command -v java >/dev/null 2>&1 || die "java not found on PATH (Kafka 4 needs Java 17+)"
  local v
  v=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
  [[ ${v%%.*} =~ ^[0-9]+$ ]] && ((${v%%.*} >= 17)) || die "Kafka 4 needs Java 17+, found java ${v:-?}"
}

kafka_version() {
  sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$KAFKA_INFRA_DIR/pom.xml" | head -n1
}

# Fetch the broker jars into lib/ (once, or again after kafka.version changes in pom.xml).
ensure_jars() {
  local v; v=$(kafka_version)
  [[ -n $v ]] || die "no <kafka.version> in $KAFKA_INFRA_DIR/pom.xml"
  if [[ -f $LIB_DIR/kafka_2.13-$v.jar && -n $(compgen -G "$LIB_DIR/log4j-core-*.jar") ]]; then
    return 0
  fi
  command -v mvn >/dev/null 2>&1 || die "lib/ has no Kafka $v jars and mvn is not on PATH to fetch them"
  local tmp="$KAFKA_INFRA_DIR/.lib.partial.$$" mvnlog
  mvnlog=$(mktemp)
  rm -rf "$tmp"
  note "fetching Kafka $v jars with mvn into $LIB_DIR (first run only)..."
  if ! mvn -B -q -U -Dstyle.color=never -f "$KAFKA_INFRA_DIR/pom.xml" dependency:copy-dependencies \
        -Dkafka.lib.dir="$tmp" >"$mvnlog" 2>&1; then
    echo "kafka: error: mvn could not fetch the broker jars. Failing artifact(s):" >&2
    { grep -Eo "Could not (find|resolve|transfer) artifact [^ ]+" "$mvnlog" \
        || grep -Eo "[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+:(jar|pom):[^ :,]+" "$mvnlog" | grep -v "^dev\.rllm:"; } \
      | sort -u | head -n 10 | sed 's/^/  /' >&2 || true
    echo "kafka: mvn output (last 20 lines):" >&2
    tail -n 20 "$mvnlog" | sed "s/\x1b\[[0-9;]*m//g" >&2
    rm -rf "$tmp" "$mvnlog"
    exit 1
  fi
  rm -f "$mvnlog"
  [[ -f $tmp/kafka_2.13-$v.jar ]] || { rm -rf "$tmp"; die "mvn ran but kafka_2.13-$v.jar is missing"; }
  rm -rf "$LIB_DIR"
  mv -T "$tmp" "$LIB_DIR" 2>/dev/null || rm -rf "$tmp"   # lost a race: another start filled lib/
}

# Compile the readiness probe once into lib/probe (falls back to java's source launcher).
PROBE_CMD=()
ensure_probe() {
  local src="$KAFKA_INFRA_DIR/KafkaReady.java"
  local jflags=(-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xss512k -Xmx96m -Dlog4j2.level=ERROR)
  if command -v javac >/dev/null 2>&1; then
    if [[ ! -f $PROBE_DIR/KafkaReady.class || $src -nt $PROBE_DIR/KafkaReady.class ]]; then
      local tmp="$LIB_DIR/.probe.$$"
      rm -rf "$tmp"
      javac -nowarn -d "$tmp" -cp "$LIB_DIR/*" "$src" || die "could not compile $src"
      rm -rf "$PROBE_DIR"; mv -T "$tmp" "$PROBE_DIR" 2>/dev/null || rm -rf "$tmp"
    fi
    PROBE_CMD=(java "${jflags[@]}" -cp "$PROBE_DIR:$LIB_DIR/*" KafkaReady)
  else
    PROBE_CMD=(java "${jflags[@]}" -cp "$LIB_DIR/*" "$src")
  fi
}

# probe TIMEOUT_S [PID]: real Kafka request against our broker; prints the probe's one-line verdict.
probe() {
  local args=(--bootstrap "127.0.0.1:$PORT" --timeout "$1" --node-id "$NODE_ID")
  [[ -n ${2:-} ]] && args+=(--pid "$2")
  local cid; cid=$(cluster_id)
  [[ -n $cid ]] && args+=(--cluster-id "$cid")
  "${PROBE_CMD[@]}" "${args[@]}"
}

cluster_id() { [[ -f $META_FILE ]] && sed -n 's/^cluster\.id=//p' "$META_FILE" | head -n1 || true; }
config_value() { [[ -f $CONFIG_FILE ]] && sed -n "s/^$1=//p" "$CONFIG_FILE" | head -n1 || true; }
# Port the broker from this data dir was configured with (the last `start`).
configured_port() { config_value listeners | sed -n 's/.*PLAINTEXT:\/\/[^,]*:\([0-9]*\).*/\1/p'; }
configured_controller_port() { config_value listeners | sed -n 's/.*CONTROLLER:\/\/[^,]*:\([0-9]*\).*/\1/p'; }

# Is PID a live java process running kafka.Kafka with this data dir's config?
is_our_broker() {
  local pid=$1 cmd
  [[ $pid =~ ^[0-9]+$ && -r /proc/$pid/cmdline ]] || return 1
  cmd=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  grep -qxF kafka.Kafka <<<"$cmd" && grep -qxF "$CONFIG_FILE" <<<"$cmd"
}

# Print the pid of the broker running from DATA_DIR (pid file first, then a /proc scan).
broker_pid() {
  local pid
  if [[ -f $PID_FILE ]]; then
    pid=$(tr -dc '0-9' <"$PID_FILE")
    if is_our_broker "$pid"; then echo "$pid"; return 0; fi
  fi
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    if is_our_broker "$pid"; then echo "$pid"; echo "$pid" >"$PID_FILE" 2>/dev/null || true; return 0; fi
  done
  return 1
}

port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

who_listens() {
  command -v ss >/dev/null 2>&1 && ss -Hltnp "sport = :$1" 2>/dev/null | sed 's/^/  /' || true
}

lock_data_dir() {
  mkdir -p "$DATA_DIR"
  exec 9>"$DATA_DIR/.lock"
  flock -w 120 9 || die "another start/stop holds $DATA_DIR/.lock"
}

show_log_tail() {
  if [[ -s $LOG_FILE ]]; then
    echo "---- last 30 lines of $LOG_FILE ----" >&2
    tail -n 30 "$LOG_FILE" >&2
  fi
  if [[ -s $OUT_FILE ]]; then
    echo "---- last 30 lines of $OUT_FILE (this run) ----" >&2
    awk '/^==== .* start: /{n=0} {buf[n++]=$0} END{for(i=(n>30?n-30:0);i<n;i++) print buf[i]}' "$OUT_FILE" >&2
  fi
}

# Send SIGTERM, wait up to RLLM_KAFKA_STOP_TIMEOUT, then SIGKILL.
kill_broker() {
  local pid=$1 waited=0 limit=${RLLM_KAFKA_STOP_TIMEOUT:-30}
  kill -TERM "$pid" 2>/dev/null || return 0
  while kill -0 "$pid" 2>/dev/null && ((waited < limit * 10)); do sleep 0.1; waited=$((waited + 1)); done
  if kill -0 "$pid" 2>/dev/null; then
    note "broker $pid did not exit within ${limit}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
}
