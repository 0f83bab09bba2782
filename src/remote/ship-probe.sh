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
# A new mirror is made beside it and renamed into place (no lock, so no
# flock needed): of two first dispatches at once, one rename wins; the
# other's lands inside the winner (mv into a directory) and is removed.
if [ ! -d "$m" ]; then
  t=$m.init.$$
  rm -rf -- "$t"
  git init --bare -q "$t" || { rm -rf -- "$t"; exit 1; }
  mv -- "$t" "$m" 2>/dev/null
  b=${t##*/}; rm -rf -- "$t" "$m/${b:?}"
  [ -d "$m/objects" ] || exit 1
fi
git -C "$m" for-each-ref --format='have %(objectname)' refs/saphan/shipped/
for s in "$@"; do git -C "$m" cat-file -e "$s^{commit}" 2>/dev/null && echo "present $s"; done
exit 0
