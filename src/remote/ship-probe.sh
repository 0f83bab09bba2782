# saphan-ship — open (or create) the machine's mirror and say what it holds
# (src/dispatch/ship.rs).
#
# Arguments: $1 the mirror (a bare repository's path), then the SHAs about
#   to be shipped.
# Prints, on stdout, one line each: `have <sha>` for every commit a ref
#   under refs/saphan/shipped/ names, then `present <sha>` for every SHA
#   among the arguments the mirror already holds. The caller reads the whole
#   output (a file), never a bounded tail.
# Exit: 0; 1 the mirror's directories cannot be created or it cannot be
#   initialized.
m=$1; shift; mkdir -p "$(dirname "$m")" "$(dirname "$m")/../incoming" || exit 1
# shellcheck disable=SC2016 # $1 belongs to the inner shell
[ -d "$m" ] || flock "$m.init-lock" sh -c '[ -d "$1" ] || git init --bare -q "$1"' sh "$m" || exit 1
git -C "$m" for-each-ref --format='have %(objectname)' refs/saphan/shipped/
for s in "$@"; do git -C "$m" cat-file -e "$s^{commit}" 2>/dev/null && echo "present $s"; done
exit 0
