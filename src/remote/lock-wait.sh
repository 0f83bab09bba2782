# saphan-lock-wait — wait until the lock holder (lock.sh) says it holds the
# lock, then look for what an earlier attempt may have left
# (src/dispatch/lock.rs, MachineLock).
#
# Arguments: $1 the ready file lock.sh creates; $2 (optional) a path to
#   look for once the lock is held (the stable scratch tree a lost
#   connection left).
# Prints: `left` when $2 is given and exists once $1 does; nothing
#   otherwise.
# Exit: 0 once $1 exists; 3 (LOCK_WAIT_EXIT_TIMEOUT) when it did not appear
#   within 20 polls of 0.01 s and 1400 of 0.05 s (70 s). The first polls
#   are short: a free lock is taken within milliseconds of the holder's
#   start, and every attempt on the machine waits for this answer.
i=0 s=0.01
while [ ! -e "$1" ]; do
  i=$((i + 1)); [ "$i" -gt 1420 ] && exit 3
  [ "$i" -gt 20 ] && s=0.05
  sleep "$s"
done
if [ -n "${2-}" ] && [ -e "$2" ]; then echo left; fi
exit 0
