# saphan-lock — hold the repository's lock on a machine for one attempt
# (src/dispatch/mod.rs, MachineLock).
#
# Arguments: $1 the lock file, $2 the ready file (created once the lock is
#   held, in the attempt's run directory), $3 how long to wait for the
#   lock, in whole seconds, $4 (optional) who holds it: the members of a
#   JSON object without its braces (`"pid":1,"verb":"certify","host":"h"`),
#   written once the lock is held as one line `{"since":"<UTC>",$4}` to
#   `$1.holder` (temp + rename), removed again on release — what a waiter
#   reads (lock-wait.sh).
# Busy: when the lock is not free at the first try, `$2.busy` is created
#   (lock-wait.sh then says who holds it).
# Stdin: the controller's pipe; the lock is held until it closes (the
#   controller releases it, or the connection is lost).
# The lock: `flock -n` on $1, tried every 0.05 s for $3 seconds, where
#   flock runs (util-linux's or busybox's: `-n` is common to both). Where it
#   does not (absent or not runnable: an exit other than 0 or 1), a `mkdir`
#   lock: the directory `$1.d`, holding `owner`
#   (this shell's pid and start time, from /proc or `ps -o lstart=`). Its
#   lifetime is flock's: removed when stdin closes, on HUP/INT/TERM (the
#   watchdog's budget TERMs the group), and — when the holder was killed
#   with KILL — broken by the next waiter once `owner`'s process is gone or
#   is another process (same pid, other start time); an `owner` never
#   written is broken after 5 s. A waiter breaks a stale lock by first
#   creating `$1.d/broken` (one breaker per stale lock) and checking that
#   `owner` is still the stale one.
# Holds, while it runs, where flock runs: a `flock` on $2 itself too, so the
#   next attempt's reap (ship-probe.sh) can tell a run directory whose
#   attempt is over (`flock -n` gets it) from a live one. Under the mkdir
#   lock $2 is a plain file and the reap leaves run directories alone.
# Prints: nothing.
# Exit: 0 when stdin closed (the lock is then released);
#   3 (LOCK_EXIT_BUSY) another run held the lock for $3 seconds;
#   4 (LOCK_EXIT_MKDIR) the directories of $1 or $2 cannot be created;
#   another code: the shell failed.
mkdir -p "$(dirname "$1")" "$(dirname "$2")" || exit 4
lk=$1 who=${4-}
exec 9>"$1"
i=0 max=$(($3 * 20))
# holder: write $lk.holder (once the lock is held).
holder() {
  [ -n "$who" ] || return 0
  printf '{"since":"%s",%s}\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$who" > "$lk.holder.new" &&
    mv -f -- "$lk.holder.new" "$lk.holder"
}
flock -n 9 2>/dev/null; rc=$?
[ "$rc" = 1 ] && : > "$2.busy"
while [ "$rc" = 1 ]; do
  i=$((i + 1)); [ "$i" -gt "$max" ] && exit 3
  sleep 0.05
  flock -n 9 2>/dev/null; rc=$?
done
if [ "$rc" = 0 ]; then
  exec 8>"$2.new"
  flock 8 || exit 3
  holder
  mv -f -- "$2.new" "$2" || exit 3
  cat >/dev/null
  rm -f -- "$1.holder"
  exit 0
fi
exec 9>&-
d=$1.d i=0
# ident PID: "PID START" while PID runs (START its start time), else empty.
ident() {
  if [ -d /proc/self ]; then
    { read -r l < "/proc/$1/stat"; } 2>/dev/null || return 0
    l=${l##*) }
    # shellcheck disable=SC2086 # the fields are split on purpose
    set -- "$1" $l
    echo "$1 ${21}"
  else
    s=$(ps -o lstart= -p "$1" 2>/dev/null) || return 0
    # shellcheck disable=SC2086 # the words are joined by single spaces
    set -- "$1" $s
    [ "$#" -gt 1 ] && echo "$*"
  fi
}
me=$(ident $$)
[ -n "$me" ] || me="$$ unknown"
gone=0 busy=
until mkdir "$d" 2>/dev/null; do
  [ -n "$busy" ] || { busy=1; : > "$2.busy"; }
  o=
  [ -f "$d/owner" ] && { read -r o < "$d/owner"; } 2>/dev/null
  stale=
  if [ -n "$o" ]; then
    gone=0
    [ "$(ident "${o%% *}")" = "$o" ] || stale=1
  elif [ -d "$d" ]; then
    gone=$((gone + 1)); [ "$gone" -gt 100 ] && stale=1
  fi
  if [ -n "$stale" ] && mkdir "$d/broken" 2>/dev/null; then
    o2=
    [ -f "$d/owner" ] && { read -r o2 < "$d/owner"; } 2>/dev/null
    if [ "$o2" = "$o" ]; then rm -rf -- "$d"; gone=0; continue; fi
    rmdir "$d/broken" 2>/dev/null
  fi
  i=$((i + 1)); [ "$i" -gt "$max" ] && exit 3
  sleep 0.05
done
# release: remove the lock only while it is still this holder's.
# shellcheck disable=SC2317 # run by the EXIT trap
release() {
  o=
  { read -r o < "$d/owner"; } 2>/dev/null
  [ "$o" = "$me" ] && rm -f -- "$lk.holder" && rm -rf -- "$d"
}
trap release EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
echo "$me" > "$d/owner" || exit 4
holder
: > "$2"
cat >/dev/null
exit 0
