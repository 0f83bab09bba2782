# saphan-probe — run each capability's version command on a machine
# (src/fleet/probe.rs, `machine probe`; the full protocol is its SCRIPT doc).
#
# Arguments: $1 the version command's timeout in seconds, $2 the workhome,
#   $3 a directory where each running version command's `timeout` pid is
#   noted (empty: none), $4 the run's nonce, then per capability: a count N,
#   the declared path and the version argv (N words in all).
# Prints, on stdout, between `@@saphan begin NONCE` and `@@saphan end NONCE`:
#   `@@saphan workhome present|absent`, then per capability K one of
#   `@@saphan item K absent|dangling|directory|not-executable`, or
#   `@@saphan item K run RC SECS TRUNC LEN` followed by exactly LEN bytes of
#   output (at most 65536, TRUNC 1 if more was drained) and a newline.
# Exit: 0.
LC_ALL=C; export LC_ALL
t="$1"; w="$2"; pd="$3"; nc="$4"; shift 4
cap=65536
nl='
'
printf '\n@@saphan begin %s\n' "$nc"
if [ -d "$w" ]; then echo "@@saphan workhome present"; else echo "@@saphan workhome absent"; fi
if command -v timeout >/dev/null 2>&1; then to=1; else to=0; fi
# shellcheck disable=SC2016 # expanded by the inner shell
hold='exec 3>&1; r=$( { { "$@" 3>&- 4>&-; echo "$?" >&4; } 2>&1 | cat >&3 3>&- 4>&-; } 4>&1 ); exit "$r"'
run() {
  if [ "$to" = 1 ]; then
    timeout -k 2 "$t" sh -c "$hold" saphan-run "$@" &
    tp=$!
    if [ -n "$pd" ]; then echo "$tp" >"$pd/$tp"; fi
    wait "$tp"; r=$?
    kill -s KILL -- -"$tp" 2>/dev/null
    if [ -n "$pd" ]; then rm -f "$pd/$tp"; fi
    return "$r"
  fi
  "$@"
}
probe() {
  k="$1"; p="$2"; shift 2
  if [ ! -e "$p" ]; then
    if [ -L "$p" ]; then echo "@@saphan item $k dangling"; else echo "@@saphan item $k absent"; fi
    return 0
  fi
  if [ -d "$p" ]; then echo "@@saphan item $k directory"; return 0; fi
  if [ ! -x "$p" ]; then echo "@@saphan item $k not-executable"; return 0; fi
  s=$(date +%s)
  out=$(exec 4>&1; rc=$( { { run "$@" </dev/null 2>&1 3>&- 4>&-; echo "$?" >&3; } | { head -c $((cap + 1)); cat >/dev/null; } >&4 3>&- 4>&-; } 3>&1 ); printf '\n%s' "$rc")
  e=$(date +%s)
  rc=${out##*"$nl"}
  out=${out%"$nl"*}
  tr=0
  if [ "${#out}" -gt "$cap" ]; then out=$(printf '%s' "$out" | head -c "$cap"); tr=1; fi
  echo "@@saphan item $k run $rc $((e - s)) $tr ${#out}"
  printf '%s\n' "$out"
}
k=0
while [ "$#" -gt 0 ]; do
  n="$1"; shift
  refs=""; i=1
  while [ "$i" -le "$n" ]; do refs="$refs \"\${$i}\""; i=$((i+1)); done
  eval "probe $k $refs"
  shift "$n"
  k=$((k+1))
done
echo "@@saphan end $nc"
