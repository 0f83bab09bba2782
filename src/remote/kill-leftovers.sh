# saphan-leftovers — kill whatever an earlier, dead attempt left running at
# a stable scratch path (src/worktree.rs, kill_leftovers), on every machine
# (this one included, through Transport::Local).
#
# Arguments: $1 the stable scratch path; $2 (optional) the attempt marker
#   file (src/worktree.rs, attempt_marker): heal.sh creates it before an
#   attempt's first marked process starts, and an attempt that ended
#   cleanly removes it — so when $2 is given and absent, no earlier
#   attempt at $1 can have left anything, and the search below is skipped.
# Finds (Linux /proc; elsewhere nothing is found): every process whose
#   environment holds `SAPHAN_SCRATCH=$1` exactly (every process saphan
#   starts for the path carries it) — its process group gets SIGKILL, then
#   the process itself — and every watchdog `sleep` armed for that path
#   (`SAPHAN_WATCHDOG=$1`, see watchdog.sh) — it alone gets SIGKILL, which
#   disarms its watchdog. Never this script's own group. Repeats until none
#   is left, for at most 500 rounds of 0.02 s (10 s).
# First: every attempt cgroup (`saphan-<pid>-…` under the cgroup v2 root,
#   see watchdog.sh and src/exec.rs) whose owner `<pid>` is no longer
#   running is killed whole (`cgroup.kill`) and removed — the daemons that
#   left the group and dropped the marker.
# Prints, on stdout: nothing when none is left; otherwise one line, the
#   pids still alive at the bound, separated by spaces.
# Exit: 0.
want="SAPHAN_SCRATCH=$1" watch="SAPHAN_WATCHDOG=$1" n=0 me='' mark=${2-}
# marked: the /proc/<pid>/environ files holding $want or $watch, one a line.
marked() {
  if [ "$z" = 1 ]; then
    grep -lzxF -e "$want" -e "$watch" /proc/[0-9]*/environ 2>/dev/null
  else
    for e in /proc/[0-9]*/environ; do
      tr '\0' '\n' 2>/dev/null < "$e" | grep -qxF -e "$want" -e "$watch" && echo "$e"
    done
  fi
}
for r in /sys/fs/cgroup /sys/fs/cgroup/unified; do
  [ -e "$r/cgroup.controllers" ] || continue
  for g in "$r"/saphan-*; do
    [ -e "$g/cgroup.kill" ] || continue
    o=${g##*/saphan-}; o=${o%%-*}
    [ -d "/proc/$o" ] && continue
    echo 1 > "$g/cgroup.kill" 2>/dev/null
    k=0
    while ! grep -qx 'populated 0' "$g/cgroup.events" 2>/dev/null && [ "$k" -lt 250 ]; do sleep 0.02; k=$((k+1)); done
    rmdir "$g" 2>/dev/null
  done
  break
done
[ -n "$mark" ] && [ ! -e "$mark" ] && exit 0
# This script's own process group (the 5th field of its stat; its comm,
# `sh`, holds no space).
read -r _ _ _ _ me _ 2>/dev/null < /proc/$$/stat
z=0
if printf 'a\0' | grep -qzxF a 2>/dev/null; then z=1; fi
while :; do
  left=
  for e in $(marked); do
    d=${e%/environ}; pid=${d#/proc/}
    [ "$pid" = "$$" ] && continue
    s=$(cat "$d/stat" 2>/dev/null) || continue
    rest=${s##*) }
    case $rest in Z*|X*) continue ;; esac
    left="$left $pid"
    if tr '\0' '\n' 2>/dev/null < "$e" | grep -qxF -e "$want"; then
      # shellcheck disable=SC2086 # the fields are split on purpose
      set -- $rest
      [ -n "$3" ] && [ "$3" != "$me" ] && kill -KILL -"$3" 2>/dev/null
    fi
    kill -KILL "$pid" 2>/dev/null
  done
  [ -z "$left" ] && exit 0
  n=$((n+1)); [ "$n" -gt 500 ] && { printf '%s\n' "${left# }"; exit 0; }
  sleep 0.02
done
