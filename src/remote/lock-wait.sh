# saphan-lock-wait — wait until the lock holder (lock.sh) says it holds the
# lock, then look for what an earlier attempt may have left; or, while
# another run holds it, say who (src/dispatch/lock.rs, MachineLock).
#
# Arguments: $1 the ready file lock.sh creates; $2 (optional, may be
#   empty) a path to look for once the lock is held (the stable scratch
#   tree a lost connection left); $3 (optional) the holder file lock.sh's
#   holder writes (`<lock>.holder`); $4 (optional, with $3) after how many
#   whole seconds of this wait to say the lock is busy (0: at once).
# Prints: `left` when $2 is given and exists once $1 does; nothing
#   otherwise. Busy: `busy`, then the first line of $3 (empty when there
#   is none).
# Exit: 0 once $1 exists; 3 (LOCK_WAIT_EXIT_TIMEOUT) when it did not appear
#   within 20 polls of 0.01 s and 1400 of 0.05 s (70 s); 5
#   (LOCK_WAIT_EXIT_BUSY) when $3 is given, lock.sh found the lock taken
#   (it created `$1.busy`) and $4 seconds have passed. The first polls
#   are short: a free lock is taken within milliseconds of the holder's
#   start, and every attempt on the machine waits for this answer.
i=0 s=0.01
# $4 seconds as a count of polls (the first 20 take 0.2 s, then 20 a second).
after=0
[ "${4:-0}" -gt 0 ] && after=$((20 + $4 * 20))
while [ ! -e "$1" ]; do
  if [ -n "${3-}" ] && [ "$i" -ge "$after" ] && [ -e "$1.busy" ]; then
    h=
    { read -r h < "$3"; } 2>/dev/null
    printf 'busy\n%s\n' "$h"
    exit 5
  fi
  i=$((i + 1)); [ "$i" -gt 1420 ] && exit 3
  [ "$i" -gt 20 ] && s=0.05
  sleep "$s"
done
if [ -n "${2-}" ] && [ -e "$2" ]; then echo left; fi
exit 0
