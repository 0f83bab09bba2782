# saphan-run — the supervisor every command saphan runs on an SSH machine
# runs under (src/transport/watchdog.rs).
#
# Arguments: $1 the run's nonce, $2 the budget in seconds, $3 the grace in
#   seconds, $4 the working directory (empty: the login directory), $5 the
#   text of watchdog-inner.sh, then the environment changes for the program
#   (`+K=V` exports, `-K` unsets), `--`, the program and its arguments.
# Environment: none read. The changes are applied by the inner shell, to
#   the program alone: the supervisor and its watchdog never carry them.
#   The watchdog's `sleep` alone carries `SAPHAN_WATCHDOG=<scratch path>`
#   when the changes hold `+SAPHAN_SCRATCH=<scratch path>`, so the reap of
#   that scratch path (kill-leftovers.sh) finds and disarms it.
# Containment: a command whose changes hold `+SAPHAN_SCRATCH=…` (an
#   attempt's) also gets its own cgroup where a cgroup v2 hierarchy with
#   `cgroup.kill` is writable here (/sys/fs/cgroup, or
#   /sys/fs/cgroup/unified on a hybrid layout): `saphan-<this pid>-NONCE`
#   under its root. The inner shell moves itself into it before anything
#   runs; once the program's leader has ended, the whole cgroup is killed
#   (`cgroup.kill`: daemons that left the group and the environment too)
#   and removed. A cgroup whose supervisor died is kill-leftovers.sh's.
# Prints, on stderr: `NONCE contain cgroup|process-group` for an attempt's
#   command, then `NONCE pgid N` (from the inner shell, N the program's
#   process group), then one final line after a newline: `NONCE exit CODE`,
#   `NONCE timeout`, `NONCE nocwd`, `NONCE nosetsid` or `NONCE noprogram`.
#   stdout is the program's.
# Exit: always 0; how the program ended is the final stderr line.
#
# The watchdog signals the group only while it is still the attempt's:
# the group's leader is the same process (same start time in
# /proc/N/stat), or it has ended while this supervisor, its parent, is
# still alive (then its id cannot have been reused). A watchdog whose
# supervisor died, or whose `sleep` was killed by a reap, signals nothing.
# Without /proc (not Linux) there is nothing to check: it signals the group.
n=$1 b=$2 g=$3 d=$4 i=$5; shift 5
# The supervisor's own stderr is fd 4, and fd 2 is /dev/null: a shell tells
# of a job that died of a signal on its stderr, whenever it notices (dash,
# bash and busybox print `Killed` for a suite killed by SIGKILL, `Terminated`
# for a watchdog that got its TERM before its trap was set), and that line
# is not the program's. The program alone is given the channel's stderr.
exec 4>&2 2>/dev/null
m=
for a in "$@"; do
  case $a in
    --) break ;;
    +SAPHAN_SCRATCH=*) m=${a#+SAPHAN_SCRATCH=} ;;
  esac
done
if [ -n "$d" ]; then cd -- "$d" || { printf '\n%s nocwd\n' "$n" >&4; exit 0; }; fi
command -v setsid >/dev/null || { printf '\n%s nosetsid\n' "$n" >&4; exit 0; }
# pstat FILE: read a /proc/<pid>/stat into $ppid and $start (its start time).
pstat() {
  # (braced: a failed `<` is reported before a `2>` after it applies)
  { read -r l < "$1"; } 2>/dev/null || return 1
  l=${l##*) }
  # shellcheck disable=SC2086 # the fields are split on purpose
  set -- $l
  ppid=$2 start=${20}
}
c=
if [ -n "$m" ]; then
  for r in /sys/fs/cgroup /sys/fs/cgroup/unified; do
    [ -e "$r/cgroup.controllers" ] || continue
    if mkdir "$r/saphan-$$-$n" 2>/dev/null; then
      if [ -e "$r/saphan-$$-$n/cgroup.kill" ]; then c="$r/saphan-$$-$n"; else rmdir "$r/saphan-$$-$n"; fi
    fi
    break
  done
  if [ -n "$c" ]; then printf '%s contain cgroup\n' "$n" >&4; else printf '%s contain process-group\n' "$n" >&4; fi
fi
exec 3<&0
setsid sh -c "$i" "$n" "$c" "$@" <&3 3<&- 2>&4 4>&- &
p=$!
exec 3<&-
s0=
if pstat "/proc/$p/stat"; then s0=$start; fi
(
  sup=$$
  # ours: the group is still this attempt's (see the header).
  ours() {
    [ -n "$s0" ] || return 0
    if pstat "/proc/$p/stat"; then [ "$start" = "$s0" ]; return; fi
    pstat /proc/self/stat && [ "$ppid" = "$sup" ]
  }
  # The supervisor's TERM only notes itself (x) and stops the current
  # `sleep` once its pid is known: a TERM that lands between the fork of
  # `sleep` and `s=$!` is seen by the check after it. The `sleep` gets
  # KILL, not TERM: until it execs, the forked child still runs this
  # trap, and a TERM there would leave it running. Either way no `sleep`
  # outlives its watchdog (a fast command used to leave one for its whole
  # budget, about 1 run in 20).
  x='' s=''
  trap 'x=1; [ -z "$s" ] || kill -KILL "$s" 2>/dev/null' TERM
  SAPHAN_WATCHDOG=$m sleep "$b" & s=$!
  [ -z "$x" ] || { kill -KILL "$s" 2>/dev/null; exit 0; }
  wait "$s" || exit 0
  s=
  [ -z "$x" ] || exit 0
  ours || exit 0
  kill -TERM -"$p" 2>/dev/null
  SAPHAN_WATCHDOG=$m sleep "$g" & s=$!
  [ -z "$x" ] || kill -KILL "$s" 2>/dev/null
  wait "$s"
  ours && kill -KILL -"$p" 2>/dev/null
  exit 3
) </dev/null >/dev/null 2>&1 4>&- &
w=$!
wait "$p"; st=$?
kill -TERM "$w" 2>/dev/null
wait "$w"; ws=$?
kill -KILL -"$p" 2>/dev/null
if [ -n "$c" ]; then
  echo 1 > "$c/cgroup.kill" 2>/dev/null
  k=0
  while ! grep -qx 'populated 0' "$c/cgroup.events" 2>/dev/null && [ "$k" -lt 250 ]; do sleep 0.02; k=$((k+1)); done
  rmdir "$c" 2>/dev/null
fi
if [ "$ws" = 3 ]; then printf '\n%s timeout\n' "$n" >&4; else printf '\n%s exit %s\n' "$n" "$st" >&4; fi
exit 0
