# saphan-ship — open (or create) the machine's mirror, reap what dead
# attempts left in the workhome, and say what the mirror holds
# (src/dispatch/ship.rs).
#
# Arguments: $1 the mirror (a bare repository's path, `<base>/mirrors/…`),
#   $2 the age in minutes past which nothing of a live attempt can still be
#   written (every ship command's budget is shorter), then the SHAs about to
#   be shipped.
# Environment: saphan's git hardening (src/git.rs, hardening_env: no hooks,
#   replace refs and grafts ignored), which every `git` here inherits; set
#   by the caller (src/remote/mod.rs, sh), never spelled here.
# Reaps (each one printed as `reaped <path>`):
#   - `<base>/incoming/*.bundle` older than $2 minutes (a half bundle a cut
#     connection left: a live transfer writes it, and is bounded);
#   - the mirror's `objects/pack/tmp_*` and `objects/tmp_*` and its
#     `shallow.saphan.*` older than $2 minutes (a fetch that died, e.g. on a
#     full disk);
#   - `<base>/runs/<id>/` whose attempt is over: its `locked` file is no
#     longer held by that attempt's lock.sh (`flock -n` gets it), or it has
#     none and is older than $2 minutes (an attempt that died waiting).
# Prints, on stdout, one line each: the `reaped <path>` lines, then
#   `have <sha>` for every commit a ref under refs/saphan/shipped/ names,
#   then `present <sha>` for every SHA among the arguments the mirror
#   already holds. The caller reads the whole output (a file), never a
#   bounded tail.
# Exit: 0; 1 the mirror's directories cannot be created or it cannot be
#   initialized.
m=$1 age=$2; shift 2
b=$(dirname "$(dirname "$m")")
mkdir -p "$(dirname "$m")" "$b/incoming" || exit 1
# old PATH… : the paths among PATH… last changed more than $age minutes ago.
old() { find "$@" -maxdepth 0 -mmin +"$age" 2>/dev/null; }
for f in $(old "$b"/incoming/*.bundle "$m"/objects/pack/tmp_* "$m"/objects/tmp_* "$m"/shallow.saphan.*); do
  rm -rf -- "$f" && echo "reaped $f"
done
if [ -d "$b/runs" ]; then
  for r in "$b"/runs/*/; do
    r=${r%/}
    [ -d "$r" ] || continue
    if [ -e "$r/locked" ]; then
      # Over only when flock gets it; where flock does not run (the mkdir
      # lock) nothing tells a live attempt's directory, so it stays.
      flock -n "$r/locked" true 2>/dev/null || continue
    elif [ -z "$(old "$r")" ]; then
      continue
    fi
    rm -rf -- "$r" && echo "reaped $r"
  done
fi
# A new mirror is made beside it and renamed into place (no lock, so no
# flock needed): of two first dispatches at once, one rename wins; the
# other's lands inside the winner (mv into a directory) and is removed.
if [ ! -d "$m" ]; then
  t=$m.init.$$
  rm -rf -- "$t"
  git init --bare -q "$t" || { rm -rf -- "$t"; exit 1; }
  mv -- "$t" "$m" 2>/dev/null
  n=${t##*/}; rm -rf -- "$t" "$m/${n:?}"
  [ -d "$m/objects" ] || exit 1
fi
git -C "$m" for-each-ref --format='have %(objectname)' refs/saphan/shipped/
for s in "$@"; do git -C "$m" cat-file -e "$s^{commit}" 2>/dev/null && echo "present $s"; done
exit 0
