# saphan-fetch — receive one bundle on stdin, verify it and fetch it into
# the mirror (src/dispatch/ship.rs).
#
# Arguments: $1 the mirror, $2 the incoming bundle file to write, $3 the
#   bundle's ref, $4 the SHA (the mirror keeps it as
#   refs/saphan/shipped/<sha>), $5 the bundle's size in bytes, then the
#   shallow boundary's commits (none for a full clone), added to the
#   mirror's `shallow` file first.
# Environment: saphan's git hardening (src/git.rs, hardening_env: no hooks,
#   replace refs and grafts ignored), which every `git` here inherits; set
#   by the caller (src/remote/mod.rs, sh), never spelled here.
# Stdin: the bundle's bytes.
# Prints: on failure, git's complaint on stderr.
# Exit: 0 fetched; non-zero the bundle did not arrive whole, did not verify
#   or did not fetch. The incoming file is removed on every path but a kill
#   (saphan never kills this script: to stop a ship it ends the stream
#   early, src/dispatch/ship.rs).
#
# A stream that ended early (saphan stopped sending) leaves a half bundle.
# `git bundle verify` reads only a bundle's header, so a half bundle passes
# it, and fetching one leaves the dead index-pack's `tmp_pack_*` in the
# mirror: a bundle that is not exactly $5 bytes is never fetched.
if ! { mkdir -p "$(dirname "$2")" && cat > "$2"; }; then rm -f "$2"; exit 1; fi
n=$(wc -c < "$2") || n=-1
if [ "$((n))" -ne "$5" ]; then
  echo "the bundle arrived cut short: $((n)) of $5 bytes" >&2; rm -f "$2"; exit 1
fi
git -C "$1" bundle verify -q "$2" >/dev/null 2>&1 || { git -C "$1" bundle verify "$2"; rm -f "$2"; exit 1; }
m=$1 b=$2 r=$3 s=$4; shift 5
if [ $# -gt 0 ]; then
  if ! { { cat "$m/shallow" 2>/dev/null; printf '%s\n' "$@"; } | sort -u > "$m/shallow.saphan.$$" && mv "$m/shallow.saphan.$$" "$m/shallow"; }; then
    rm -f "$m/shallow.saphan.$$" "$b"; exit 1
  fi
fi
git -C "$m" fetch -q "$b" "$r:refs/saphan/shipped/$s"; rc=$?; rm -f "$b"; exit $rc
