# saphan-mirror-check — is a machine's mirror whole? Run only after a git
# command on it failed (src/dispatch/ship.rs), since it walks every
# reachable object.
#
# Arguments: $1 the mirror (a bare repository's path).
# Environment: saphan's git hardening (src/git.rs, hardening_env: no hooks,
#   replace refs and grafts ignored), which every `git` here inherits; set
#   by the caller (src/remote/mod.rs, sh), never spelled here.
# Prints: on stdout, when the mirror is corrupt, the first line of git's
#   complaint (`git fsck --connectivity-only`: a pack that does not match
#   its index, a missing object, a ref to nothing); nothing otherwise.
# Exit: 0 sound (or absent); 1 (MIRROR_CHECK_EXIT_CORRUPT) corrupt;
#   2 git could not be run there (nothing is known).
[ -e "$1" ] || exit 0
command -v git >/dev/null 2>&1 || exit 2
e=$(git -C "$1" fsck --connectivity-only --no-dangling --no-progress 2>&1 >/dev/null) && exit 0
printf '%s\n' "$e" | grep -v '^notice:' | head -n 1
exit 1
