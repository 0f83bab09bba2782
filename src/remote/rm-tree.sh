# saphan-rm — delete a scratch tree by hand, when `git worktree remove`
# could not (src/worktree.rs, Scratch::remove and its drop), on every
# machine (this one included).
#
# Arguments: $1 the tree, $2 its admin entry (`…/worktrees/<name>`; anything
#   else is left alone).
# Prints: nothing.
# Exit: 0 (best effort: the next attempt's heal.sh finishes the job).
rm -rf -- "$1"
case $2 in */worktrees/*) rm -rf -- "$2" ;; esac
exit 0
