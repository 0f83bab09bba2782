# saphan-submodule — check one submodule out at its gitlink commit from a
# store on the same machine (src/worktree.rs, checkout_submodules).
#
# Arguments: $1 the store (a repository holding the commit), $2 the
#   submodule's directory in the scratch tree, $3 the commit.
# Environment: saphan's git hardening (src/git.rs, hardening_env: no hooks,
#   replace refs and grafts ignored), which every `git` here inherits; set
#   by the caller (src/remote/mod.rs, sh), never spelled here.
# Prints: git's complaint on stderr.
# Exit: 0 checked out; non-zero the store does not hold the commit (no
#   network is used: a `--shared` clone).
rm -rf -- "$2" && git clone -q --shared --no-checkout -- "$1" "$2" && git -C "$2" checkout -q --detach "$3"
