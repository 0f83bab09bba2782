# saphan-heal — heal the registration of exactly one stable scratch path
# and empty its parent (src/worktree.rs, heal).
#
# Arguments: $1 the repository (a working tree or a bare mirror), $2 the
#   stable scratch path.
# Environment: SAPHAN_SCRATCH=<$2> (the git calls carry the scratch marker).
# Steps: unlock and `worktree remove --force --force` $2, empty and recreate
#   its parent, then — the parent there again, so its real path can be
#   compared too — delete the one admin entry whose `gitdir` names
#   `$2/.git` if git still has it. No other worktree is touched.
# Prints: nothing on stdout; git's complaint on stderr.
# Exit: 0 healed; 1 $1 is not a repository or the parent cannot be
#   recreated.
r=$1 p=$2 q=$(dirname -- "$2") b=$(basename -- "$2")
git -C "$r" worktree unlock -- "$p" >/dev/null 2>&1
git -C "$r" worktree remove --force --force -- "$p" >/dev/null 2>&1
c=$(git -C "$r" rev-parse --path-format=absolute --git-common-dir) || exit 1
rm -rf -- "$q" && mkdir -p -- "$q" || exit 1
rq=$(cd -P -- "$q" && pwd)
for a in "$c"/worktrees/*; do
  [ -f "$a/gitdir" ] || continue
  g=$(cat "$a/gitdir")
  if [ "$g" = "$p/.git" ] || [ "$g" = "$rq/$b/.git" ]; then rm -rf -- "$a"; fi
done
exit 0
