# saphan-prepare — before an attempt at a stable scratch path: kill what an
# earlier attempt left there (kill-leftovers.sh), then heal the path's
# registration (heal.sh), in one shell: one child process here, one
# command on an SSH machine (src/worktree.rs, prepare).
#
# Arguments: $1 the text of kill-leftovers.sh, $2 the text of heal.sh,
#   $3 the repository, $4 the stable scratch path, $5 the attempt marker
#   file — the scripts' own arguments ($4 $5 for kill-leftovers.sh; $3 $4
#   $5 for heal.sh), their protocols in their headers.
# Environment: none of its own; heal.sh's git inherits the git hardening
#   it is started with (src/remote/mod.rs, sh). This shell must not carry the scratch
#   marker (SAPHAN_SCRATCH): kill-leftovers.sh runs in a subshell of it and
#   kills what carries the marker; heal.sh puts the marker on its git calls
#   itself.
# Prints, on stdout: kill-leftovers.sh's line (the pids still alive) when
#   any survived — heal.sh is then not run; otherwise nothing.
# Exit: 0 when leftovers survived; otherwise heal.sh's.
l=$1 h=$2 r=$3 p=$4 m=$5
left=$(set -- "$p" "$m"; eval "$l")
if [ -n "$left" ]; then
  printf '%s\n' "$left"
  exit 0
fi
set -- "$r" "$p" "$m"
eval "$h"
