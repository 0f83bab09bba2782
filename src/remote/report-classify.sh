# saphan-classify — describe each matched report name (src/measure/collect.rs),
# run by `xargs -0` over the names; saphan decides from the description
# (inside the tree or not, which kinds are read, which sizes are brought).
#
# Arguments: $1 the tree, then the names (relative to $1).
# Prints, on stdout, NUL-terminated fields, per run (`xargs` may run it
#   more than once; each run's block stands on its own): the count of
#   names it was given; then for every name in order `KIND`, then the path
#   it resolves to (empty if it does not resolve); then one field holding
#   the byte size of every `file` among them, in order, one per line (empty
#   when none is a file; a size that cannot be told is `x`). KIND is
#   `missing`, `file`, `dir`, `fifo`, `socket` or `device`.
# Cost: no program is started per name but for a name that is itself a
#   symlink (`readlink -f`); a name's directory is resolved with `cd -P`
#   (a builtin), and the sizes are one `stat` for the whole run (one
#   `wc -c` per file where `stat -c` does not run).
# Exit: 0; 1 the tree is not there.
cd -P -- "$1" || exit 1
root=$PWD; shift
n=$#
printf '%s\0' "$n"
last='' real=''
for f; do
  case $f in */*) d=${f%/*} ;; *) d=. ;; esac
  if [ "$d" != "$last" ]; then
    last=$d
    if cd -P -- "$root/$d" 2>/dev/null; then real=$PWD; else real=; fi
  fi
  p=$root/$f
  if [ -z "$real" ]; then r=
  elif [ -L "$p" ]; then r=$(readlink -f -- "$p" 2>/dev/null) || r=
  else r=$real/${f##*/}; fi
  if [ -z "$r" ] || [ ! -e "$r" ]; then k=missing
  elif [ -f "$r" ]; then k='file'
  elif [ -d "$r" ]; then k=dir
  elif [ -p "$r" ]; then k=fifo
  elif [ -S "$r" ]; then k=socket
  else k=device; fi
  printf '%s\0%s\0' "$k" "$r"
  [ "$k" = file ] && set -- "$@" "$r"
done
shift "$n"
s=
if [ "$#" -gt 0 ]; then
  s=$(stat -L -c %s -- "$@" 2>/dev/null) ||
    s=$(for r; do wc -c < "$r" 2>/dev/null || echo x; done)
fi
printf '%s\0' "$s"
exit 0
