# Shared by fleet/lab/{up,down,stop,partition,heal,stall,slurm}: argument parsing and the
# names of everything a lab creates. Sourced, never run.
#
# A lab NAME (1-10 chars, [a-z0-9]) owns, and only ever touches:
#   state dir   $STATE (default /tmp/saphan-lab-NAME)
#   netns       sl-NAME-mI            (one per host mI)
#   bridge      sbNAME                (NET.1/24)
#   veth        sNAME-I  (host side; the namespace side is renamed eth0)
#   net lease   /run/saphan-lab/nets/X (when the subnet NET = 10.250.X)
# so several labs (parallel test binaries) coexist on one machine. The Slurm
# lab (fleet/lab/slurm) leases from the same pool under its own names.

set -euo pipefail

die() { echo "fleet/lab: $*" >&2; exit 2; }

NAME=lab
STATE=
NET=
HOSTS=4
CONNECT_TIMEOUT=2
POS=()

parse_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --name) NAME="$2"; shift 2 ;;
      --state) STATE="$2"; shift 2 ;;
      --net) NET="$2"; shift 2 ;;
      --hosts) HOSTS="$2"; shift 2 ;;
      --connect-timeout) CONNECT_TIMEOUT="$2"; shift 2 ;;
      -h|--help) usage; exit 0 ;;
      --*) die "unknown option $1 — see --help" ;;
      *) POS+=("$1"); shift ;;
    esac
  done
  [[ "$NAME" =~ ^[a-z0-9]{1,10}$ ]] || die "lab name '$NAME' must be 1-10 characters [a-z0-9]"
  [[ "$HOSTS" =~ ^[0-9]+$ ]] && [ "$HOSTS" -ge 1 ] && [ "$HOSTS" -le 200 ] \
    || die "--hosts must be 1..200"
  [ -n "$STATE" ] || STATE="${TMPDIR:-/tmp}/saphan-lab-$NAME"
  BRIDGE="sb$NAME"
  LEASES=/run/saphan-lab/nets
}

# --- subnet leases -----------------------------------------------------------
# A lease is a directory $LEASES/X (for 10.250.X/24) holding `owner` (the lab
# that holds it: NAME for an sshd lab, slurm-NAME for a Slurm lab) and
# `bridge` (its bridge; an old lease without one means sbOWNER).
lease_ok() { # X: free when nothing routes 10.250.X.0/24 yet
  [ -z "$(ip -4 route show "10.250.$1.0/24" 2>/dev/null)" ]
}
reap_stale() { # a lease whose lab bridge is gone and which is older than a minute
  local d="$1" owner bridge
  owner="$(cat "$d/owner" 2>/dev/null || true)"
  bridge="$(cat "$d/bridge" 2>/dev/null || true)"
  [ -n "$bridge" ] || bridge="sb$owner"
  if [ -n "$owner" ] && ! ip link show "$bridge" >/dev/null 2>&1 \
     && [ -n "$(find "$d" -maxdepth 0 -mmin +1 2>/dev/null)" ]; then
    rm -rf "$d"
  fi
}
# lease_net OWNER BRIDGE [CHECK]: lease the first free 10.250.X/24 (and, with
# CHECK, the first X for which `CHECK X` also succeeds); sets NET and LEASE.
lease_net() {
  local owner="$1" bridge="$2" check="${3:-}" x
  mkdir -p "$LEASES"
  for x in $(seq 1 254); do
    [ -d "$LEASES/$x" ] && reap_stale "$LEASES/$x"
    if lease_ok "$x" && { [ -z "$check" ] || "$check" "$x"; } \
       && mkdir "$LEASES/$x" 2>/dev/null; then
      echo "$bridge" > "$LEASES/$x/bridge"
      echo "$owner" > "$LEASES/$x/owner"
      NET="10.250.$x"; LEASE="$LEASES/$x"
      return 0
    fi
  done
  return 1
}

ns_of() { echo "sl-$NAME-$1"; }            # host id (m0) -> netns name
veth_of() { echo "s$NAME-${1#m}"; }        # host id (m0) -> host-side veth
ip_of() { echo "$NET.$((10 + ${1#m}))"; }  # host id (m0) -> address

# Read what `up` recorded, for the fault helpers and `down`.
load_state() {
  [ -f "$STATE/lab.env" ] || die "no lab at $STATE (run fleet/lab/up --name $NAME first)"
  # shellcheck disable=SC1091
  . "$STATE/lab.env"
}

host_arg() {
  local h="${POS[0]:-}"
  [[ "$h" =~ ^m[0-9]+$ ]] || die "name a host: m0, m1, …"
  [ -f "$STATE/$h/sshd_config" ] || die "host $h is not part of lab $NAME"
  echo "$h"
}

# Kill every process in namespace $1 and wait (bounded) until each one is
# really gone and nothing listens there any more, so the caller's next connect
# sees the host down. (A killed sshd can linger in state D, out of
# `ip netns pids` already but still holding its listening socket.)
kill_ns() {
  local ns="$1" pids all="" p deadline=$((SECONDS + 10))
  while :; do
    pids="$(ip netns pids "$ns" 2>/dev/null || true)"
    all="$all $pids"
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
    local alive=""
    for p in $all; do
      if [ -e "/proc/$p" ] && [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ]; then
        alive="$alive $p"
      fi
    done
    all="$alive"
    if [ -z "$pids" ] && [ -z "$alive" ] \
       && [ -z "$(ip netns exec "$ns" ss -Hltn 2>/dev/null)" ]; then
      return 0
    fi
    [ $SECONDS -lt $deadline ] || { echo "fleet/lab: processes in $ns survive:$alive $pids" >&2; return 1; }
    sleep 0.02
  done
}
