# saphan-heal — heal the registration of exactly one stable scratch path
# and empty its parent (src/worktree.rs, heal).
#
# Arguments: $1 the repository (a working tree or a bare mirror), $2 the
#   stable scratch path, $3 (optional) the attempt marker file
#   (src/worktree.rs, attempt_marker), created first (before this
#   script's git calls, which carry the scratch marker).
# Environment: saphan's git hardening (src/git.rs, hardening_env: no hooks,
#   replace refs and grafts ignored), which every `git` here inherits; set
#   by the caller (src/remote/mod.rs, sh), never spelled here. Its git
#   calls carry the scratch marker (SAPHAN_SCRATCH=<$2>), which it exports
#   for them.
# First: the parent (and the marker's directory) is created when missing
#   (`mkdir -p`), then the marker.
# Check, with shell builtins only (no child process): when $2 does not exist, its parent is empty, and no
#   admin entry of the
#   repository's common dir (`$1/.git`, or `$1` itself for a bare
#   repository) names `$2/.git` (or the same path through the parent's real
#   path), there is nothing to heal. A common dir that cannot be told that
#   way (a linked worktree's `.git` file), a relative `gitdir` or a path
#   holding a newline counts as something to heal.
# Steps, when there is something to heal: unlock and `worktree remove
#   --force --force` $2, empty and recreate its parent, then — the parent
#   there again, so its real path can be compared too — delete the one
#   admin entry whose `gitdir` names `$2/.git` if git still has it. No other
#   worktree is touched.
# Refusal, before any step: a registration of $2 that is locked is not
#   saphan's to remove — unless its lock is the one `git worktree add`
#   holds while it works (`initializing`) and the attempt marker was there
#   before this run (an earlier attempt's add was killed). Nothing is
#   touched then (exit 3).
# Prints: nothing on stdout; git's complaint on stderr.
# Exit: 0 healed; 1 $1 is not a repository, the parent cannot be recreated
#   or the marker cannot be written; 3 (HEAL_EXIT_FOREIGN) $2 is a worktree
#   someone else registered and locked.
r=$1 p=$2 m=${3-} q=${2%/*} b=${2##*/}
[ -n "$q" ] || q=/
nl='
'
# dirty: 0 when there is nothing to heal, by builtins alone.
dirty() {
  case $p in *"$nl"*) return 0 ;; esac
  [ -e "$p" ] || [ -L "$p" ] && return 0
  [ -d "$q" ] || return 0
  for f in "$q"/* "$q"/.[!.]* "$q"/..?*; do
    [ -e "$f" ] || [ -L "$f" ] && return 0
  done
  if [ -f "$r/.git/HEAD" ]; then c=$r/.git
  elif [ -f "$r/HEAD" ] && [ -d "$r/objects" ] && [ ! -e "$r/commondir" ]; then c=$r
  else return 0
  fi
  rq=
  for a in "$c"/worktrees/*; do
    [ -f "$a/gitdir" ] || continue
    IFS= read -r g < "$a/gitdir" || [ -n "$g" ] || continue
    case $g in /*) ;; *) return 0 ;; esac
    [ "$g" = "$p/.git" ] && return 0
    if [ -z "$rq" ]; then
      o=$PWD
      cd -P -- "$q" 2>/dev/null || return 0
      rq=$PWD
      cd -- "$o" || return 0
    fi
    [ "$g" = "$rq/$b/.git" ] && return 0
  done
  return 1
}
[ -d "$q" ] || mkdir -p -- "$q" || exit 1
had=0
[ -n "$m" ] && [ -e "$m" ] && had=1
if [ -n "$m" ]; then
  [ -d "${m%/*}" ] || mkdir -p -- "${m%/*}" || exit 1
  : > "$m" || exit 1
fi
if dirty; then
  SAPHAN_SCRATCH=$p
  export SAPHAN_SCRATCH
  c=$(git -C "$r" rev-parse --path-format=absolute --git-common-dir) || exit 1
  rq=$(cd -P -- "$q" && pwd)
  for a in "$c"/worktrees/*; do
    [ -f "$a/gitdir" ] || continue
    [ -f "$a/locked" ] || continue
    g=$(cat "$a/gitdir")
    if [ "$g" = "$p/.git" ] || [ "$g" = "$rq/$b/.git" ]; then
      why=$(cat "$a/locked")
      [ "$had" = 1 ] && [ "$why" = initializing ] && continue
      exit 3
    fi
  done
  git -C "$r" worktree unlock -- "$p" >/dev/null 2>&1
  git -C "$r" worktree remove --force --force -- "$p" >/dev/null 2>&1
  # A directory the suite made unwritable (`chmod 000`) is opened to its
  # owner first (as rm-tree.sh does), or rm could never empty the parent.
  rm -rf -- "$q" 2>/dev/null || {
    find "$q" -type d ! -perm -u=rwx -exec chmod u+rwx {} \; 2>/dev/null
    rm -rf -- "$q" || exit 1
  }
  mkdir -p -- "$q" || exit 1
  rq=$(cd -P -- "$q" && pwd)
  for a in "$c"/worktrees/*; do
    [ -f "$a/gitdir" ] || continue
    g=$(cat "$a/gitdir")
    if [ "$g" = "$p/.git" ] || [ "$g" = "$rq/$b/.git" ]; then rm -rf -- "$a"; fi
  done
fi
exit 0
