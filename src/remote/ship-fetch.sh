# saphan-fetch — receive one bundle on stdin, verify it and fetch it into
# the mirror (src/dispatch/ship.rs).
#
# Arguments: $1 the mirror, $2 the incoming bundle file to write, $3 the
#   bundle's ref, $4 the SHA (the mirror keeps it as
#   refs/saphan/shipped/<sha>), then the shallow boundary's commits (none for
#   a full clone), added to the mirror's `shallow` file first.
# Environment: saphan's git hardening (src/git.rs, hardening_env: no hooks,
#   replace refs and grafts ignored), which every `git` here inherits; set
#   by the caller (src/remote/mod.rs, sh), never spelled here.
# Stdin: the bundle's bytes.
# Prints: on failure, git's complaint on stderr.
# Exit: 0 fetched; non-zero the bundle did not arrive whole, did not verify
#   or did not fetch. The incoming file is removed on every path.
if ! { mkdir -p "$(dirname "$2")" && cat > "$2"; }; then rm -f "$2"; exit 1; fi
git -C "$1" bundle verify -q "$2" >/dev/null 2>&1 || { git -C "$1" bundle verify "$2"; rm -f "$2"; exit 1; }
m=$1 b=$2 r=$3 s=$4; shift 4
if [ $# -gt 0 ]; then
  if ! { { cat "$m/shallow" 2>/dev/null; printf '%s\n' "$@"; } | sort -u > "$m/shallow.saphan.$$" && mv "$m/shallow.saphan.$$" "$m/shallow"; }; then
    rm -f "$m/shallow.saphan.$$" "$b"; exit 1
  fi
fi
git -C "$m" fetch -q "$b" "$r:refs/saphan/shipped/$s"; rc=$?; rm -f "$b"; exit $rc
