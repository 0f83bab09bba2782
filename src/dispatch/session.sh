# saphan dispatch: one attempt on the machine, under the repository's lock.
# Positional: W KEY SHA ID BUDGET GRACE REPORT_PREFIX LIMIT NPROV
#             (NPROV pairs: STAGED DEST) NENV (NENV words K=V) -- ARGV...
# Every output goes to files under $W/runs/$ID, so a lost connection does not
# stop this script: it still kills the suite at its budget and removes the
# tree. The last line on stdout is the status line.
set -u
W=$1 key=$2 sha=$3 id=$4 budget=$5 grace=$6 rprefix=$7 limit=$8 nprov=$9
shift 9
run="$W/runs/$id"
mirror="$W/mirrors/$key.git"
base="$W/scratch/$key"
tree="$base/tree"
ts() { printf '%s %s\n' "$1" "$(date +%s.%N)" >> "$run/phases"; }
fin() {
  printf '%s\n' "$1" > "$run/status"
  cd "$run" 2>/dev/null && {
    echo '@@phases'; cat phases 2>/dev/null
    echo '@@provisions'; cat provisions 2>/dev/null
    echo '@@notes'; cat notes 2>/dev/null
    echo '@@stderr'; tail -c 4096 stderr 2>/dev/null; echo
    echo '@@err'; tail -c 2048 err 2>/dev/null; echo
  }
  echo '@@status'
  cat "$run/status"
  exit 0
}
remove_tree() {
  git -C "$mirror" worktree remove --force --force "$tree" >/dev/null 2>&1
  rm -rf "$base"
  git -C "$mirror" worktree prune >/dev/null 2>&1
}
mkdir -p "$run" "$W/locks" || fin "error cannot-create-run-dir"
exec 9>"$W/locks/$key.lock"
ts lock
flock -w 60 9 || fin "lock-timeout"
ts materialize
if [ -e "$base" ]; then
  remove_tree
  echo "reaped $tree" >> "$run/notes"
fi
mkdir -p "$base" || fin "materialize-failed cannot-create-$base"
git -C "$mirror" worktree add --detach --quiet "$tree" "$sha" 2>>"$run/err" || { remove_tree; fin "materialize-failed worktree-add"; }
gd=$(git -C "$tree" rev-parse --path-format=absolute --git-dir) || { remove_tree; fin "materialize-failed git-dir"; }
# Submodules at their gitlinks, from objects shipped into the mirror only.
if [ -s "$run/submodules" ]; then
  while read -r smsha smpath; do
    [ -n "$smpath" ] || continue
    if ! git -C "$mirror" cat-file -e "$smsha^{commit}" 2>/dev/null; then
      remove_tree; fin "submodule-missing $smsha $smpath"
    fi
    rm -rf "$tree/$smpath"
    git -C "$mirror" worktree add --detach --quiet "$tree/$smpath" "$smsha" 2>>"$run/err" || { remove_tree; fin "submodule-missing $smsha $smpath"; }
  done < "$run/submodules"
fi
excl="$gd/saphan-exclude"
printf '# saphan: provisioned files placed in this scratch worktree\n' > "$excl"
: > "$run/provisions"
i=0
while [ "$i" -lt "$nprov" ]; do
  src=$1 dest=$2
  shift 2
  i=$((i + 1))
  cur="$tree"
  oldifs=$IFS; IFS=/; set -f
  for c in $dest; do
    cur="$cur/$c"
    if [ -L "$cur" ]; then IFS=$oldifs; set +f; remove_tree; fin "provision-conflict $dest passes through a symlink committed in the tree"; fi
  done
  IFS=$oldifs; set +f
  if [ -e "$tree/$dest" ]; then remove_tree; fin "provision-conflict $dest is a path the tree already carries"; fi
  mkdir -p "$(dirname "$tree/$dest")" && cp "$src" "$tree/$dest" || { remove_tree; fin "provision-failed $dest"; }
  h=$(sha256sum < "$tree/$dest" | cut -c1-64)
  printf '%s %s\n' "$h" "$dest" >> "$run/provisions"
  printf '/%s\n' "$dest" >> "$excl"
done
nenv=$1
shift
i=0
while [ "$i" -lt "$nenv" ]; do
  kv=$(printf '%s' "$1" | sed "s|@RUN@|$run|g")
  export "$kv"
  shift
  i=$((i + 1))
done
if [ "$nprov" -gt 0 ]; then
  n=${GIT_CONFIG_COUNT:-0}
  export GIT_CONFIG_COUNT=$((n + 1)) "GIT_CONFIG_KEY_$n=core.excludesFile" "GIT_CONFIG_VALUE_$n=$excl"
fi
[ "$1" = "--" ] && shift
ts run
crash=0
if [ -e "$run/cancel" ]; then
  rc=130
elif ! (cd "$tree" && command -v "$1" >/dev/null 2>&1); then
  rc=127
  crash=1
  printf 'the suite program %s is not on this machine or not executable\n' "$1" > "$run/stderr"
else
  cd "$tree" || { remove_tree; fin "materialize-failed cd"; }
  # timeout(1) puts itself and the suite in their own process group and, at
  # the budget, sends TERM to the whole group, then KILL after the grace.
  timeout --verbose -k "$grace" "$budget" sh -c 'exec 2>"$0"; exec "$@"' "$run/stderr" "$@" \
    </dev/null >"$run/stdout" 2>"$run/timeout" 9>&- &
  pid=$!
  echo "$pid" > "$run/pid"
  wait "$pid"
  rc=$?
  # Whatever the suite left running in its group (a grandchild holding
  # stdout) does not outlive the attempt.
  kill -s KILL -- "-$pid" 2>/dev/null
  cd "$W"
fi
ts collect
to=0
grep -q 'sending signal' "$run/timeout" 2>/dev/null && to=1
[ -e "$run/stdout" ] || : > "$run/stdout"
[ -e "$run/stderr" ] || : > "$run/stderr"
ssz=$(wc -c < "$run/stdout")
rep=none
rroot="$tree"
case "$rprefix" in
  run:*) rroot="$run/reports"; rprefix=${rprefix#run:} ;;
esac
if [ -n "$rprefix" ] && [ -e "$rroot/$rprefix" ]; then
  rk=$(du -sk "$rroot/$rprefix" | cut -f1)
  if [ "$rk" -le $((limit / 1024)) ]; then
    if tar -C "$rroot" --exclude=.git -cf "$run/reports.tar" -- "$rprefix" 2>>"$run/err"; then rep=tar; else rep=tar-failed; fi
  else
    rep="too-big-$rk-KiB"
  fi
fi
ts remove
remove_tree
ts end
fin "done rc=$rc timedout=$to crash=$crash stdout_bytes=$ssz reports=$rep"
