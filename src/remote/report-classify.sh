# saphan-classify — describe each matched report name (src/measure/collect.rs),
# run by `xargs -0` over the names; saphan decides from the description
# (inside the tree or not, which kinds are read).
#
# Arguments: $1 the tree, then the names (relative to $1).
# Prints, on stdout, for every name in order, NUL-terminated: `KIND`, then
#   the path it resolves to (`readlink -f`; empty if it does not resolve).
#   KIND is `missing`, `file`, `dir`, `fifo`, `socket` or `device`.
# Exit: 0; 1 the tree is not there.
cd -P -- "$1" || exit 1
root=$(pwd); shift
for f in "$@"; do
  r=$(readlink -f -- "$root/$f" 2>/dev/null) || r=
  if [ -z "$r" ] || [ ! -e "$r" ]; then k=missing
  elif [ -f "$r" ]; then k='file'
  elif [ -d "$r" ]; then k=dir
  elif [ -p "$r" ]; then k=fifo
  elif [ -S "$r" ]; then k=socket
  else k=device; fi
  printf '%s\0%s\0' "$k" "$r"
done
