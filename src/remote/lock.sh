# saphan-lock — hold the repository's lock on a machine for one attempt
# (src/dispatch/mod.rs, MachineLock).
#
# Arguments: $1 the lock file, $2 the ready file (created once the lock is
#   held, in the attempt's run directory), $3 how long to wait for the
#   lock, in whole seconds.
# Stdin: the controller's pipe; the lock is held until it closes (the
#   controller releases it, or the connection is lost).
# Holds, while it runs: a `flock` on $2 itself too, so the next attempt's
#   reap (ship-probe.sh) can tell a run directory whose attempt is over
#   (`flock -n` gets it) from a live one.
# Prints: nothing.
# Exit: 0 when stdin closed (the lock is then released);
#   3 (LOCK_EXIT_BUSY) another run held the lock for $3 seconds;
#   4 (LOCK_EXIT_MKDIR) the directories of $1 or $2 cannot be created;
#   another code: `flock` or the shell failed.
mkdir -p "$(dirname "$1")" "$(dirname "$2")" || exit 4
exec 9>"$1"
flock -w "$3" 9 || exit 3
exec 8>"$2.new"
flock 8 || exit 3
mv -f -- "$2.new" "$2" || exit 3
exec cat >/dev/null
