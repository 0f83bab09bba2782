# saphan-mirror-renew — move a corrupt mirror aside, remove it and create an
# empty one in its place (src/dispatch/ship.rs), under the same init lock
# ship-probe.sh creates mirrors under.
#
# Arguments: $1 the mirror (a bare repository's path).
# Environment: saphan's git hardening (src/git.rs, hardening_env: no hooks,
#   replace refs and grafts ignored), which every `git` here inherits; set
#   by the caller (src/remote/mod.rs, sh), never spelled here.
# Prints: nothing on stdout; the failing command's complaint on stderr.
# Exit: 0 the mirror is new and empty; 1 it could not be moved aside or
#   created.
m=$1 a="$1.corrupt.$$"
# shellcheck disable=SC2016 # $1 and $2 belong to the inner shell
flock "$m.init-lock" sh -c 'mv -- "$1" "$2" && git init --bare -q "$1"' sh "$m" "$a" || exit 1
rm -rf -- "$a"
exit 0
