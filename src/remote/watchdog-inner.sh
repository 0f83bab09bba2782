# saphan-run's inner shell — the program's own shell, the leader of its new
# process group (started by watchdog.sh under `setsid`).
#
# Arguments: $0 the run's nonce, $1 the attempt's cgroup directory (empty:
#   none; this shell moves itself into it first, so everything the program
#   starts is in it), then the environment changes (`+K=V` exports, `-K`
#   unsets), `--`, the program and its arguments.
# Environment: the supervisor's; the changes apply from here on, to the
#   program alone.
# Prints, on stderr: `NONCE pgid N` (N = this shell's pid = the group id)
#   before exec'ing the program, or `\nNONCE noprogram` when the program is
#   not on the resulting PATH.
# Exit: the program's (it is exec'd); 127 when the program is missing.
n=$0 c=$1; shift
if [ -n "$c" ]; then echo 0 2>/dev/null > "$c/cgroup.procs" || :; fi
while [ "$#" -gt 0 ]; do
  case $1 in
    --) shift; break ;;
    +*) export "${1#+}" ;;
    -*) unset "${1#-}" ;;
  esac
  shift
done
command -v "$1" >/dev/null 2>&1 || { printf '\n%s noprogram\n' "$n" >&2; exit 127; }
printf '%s pgid %s\n' "$n" "$$" >&2
exec "$@"
