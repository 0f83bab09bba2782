# saphan-lock-wait — wait until the lock holder (lock.sh) says it holds the
# lock (src/dispatch/mod.rs, MachineLock).
#
# Arguments: $1 the ready file lock.sh creates.
# Prints: nothing.
# Exit: 0 once $1 exists; 3 (LOCK_WAIT_EXIT_TIMEOUT) when it did not appear
#   within 1400 polls of 0.05 s (70 s).
i=0; while [ ! -e "$1" ]; do i=$((i+1)); [ $i -gt 1400 ] && exit 3; sleep 0.05; done
