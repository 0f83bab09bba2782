# saphan-measure — a machine's confinement facts in one round trip
# (src/fleet/measure.rs, `machine measure`).
#
# Arguments: none.
# Prints, on stdout: sections, each introduced by a line
#   `@@saphan-measure:<name>` (uname, os-release, cpus, memory, uid,
#   userns-max, userns-clone, userns-unshare, requirements) and the whole
#   closed by `@@saphan-measure:end`. userns-unshare is `ok`, `fail` or
#   `missing`. requirements holds one line per tool dispatch uses:
#   `TOOL ok|not-runnable|absent` for flock, setsid, sha256sum, shasum, git,
#   proc, ps and bwrap — `ok` when a tiny real use of it ran (`flock -n` on
#   /dev/null, `setsid true`, the empty input's digest, `git --version`,
#   /proc/$$/stat readable, `ps -o pid`, a sealed `true`: bwrap with the
#   seal's namespaces and mounts, src/seal.rs), `not-runnable` when a file
#   of that name is on PATH but the use failed, `absent` otherwise; git's
#   line then carries its version (`git ok 2.39.5`), bwrap's its path
#   (`bwrap ok /usr/bin/bwrap`).
#   Files are read with shell builtins; besides uname, getconf, id and
#   unshare only the required tools themselves are started.
# Exit: 0 (a missing end marker means the script did not run to its end).
m() { printf '\n@@saphan-measure:%s\n' "$1"; }
cat1() { [ -r "$1" ] && while IFS= read -r l || [ -n "$l" ]; do printf '%s\n' "$l"; done < "$1"; }
m uname; uname -srm
m os-release; if [ -r /etc/os-release ]; then cat1 /etc/os-release; else cat1 /usr/lib/os-release; fi
m cpus; getconf _NPROCESSORS_ONLN 2>/dev/null || nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null
m memory; if [ -r /proc/meminfo ]; then while read -r k v u; do [ "$k" = MemTotal: ] && echo "MemTotal: $v $u"; done < /proc/meminfo; else sysctl -n hw.memsize 2>/dev/null; fi
m uid; id -u
m userns-max; cat1 /proc/sys/user/max_user_namespaces
m userns-clone; cat1 /proc/sys/kernel/unprivileged_userns_clone
m userns-unshare; if command -v unshare >/dev/null 2>&1; then if unshare -U true >/dev/null 2>&1; then echo ok; else echo fail; fi; else echo missing; fi
# found NAME: a file of that name in a PATH directory (runnable or not).
found() {
  o=$IFS; IFS=:
  for d in $PATH; do [ -e "${d:-.}/$1" ] && { IFS=$o; return 0; }; done
  IFS=$o; return 1
}
# req NAME CMD…: one requirements line for NAME from the exit of CMD….
req() {
  n=$1; shift
  if "$@" >/dev/null 2>&1; then echo "$n ok$v"
  elif [ "$n" != proc ] && found "$n"; then echo "$n not-runnable"
  else echo "$n absent"; fi
}
e0=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
use_flock() { flock -n 9 9</dev/null; [ "$?" -le 1 ]; }
use_sha256sum() { r=$(sha256sum </dev/null) && [ "${r%% *}" = "$e0" ]; }
use_shasum() { r=$(shasum -a 256 </dev/null) && [ "${r%% *}" = "$e0" ]; }
use_git() { r=$(git --version) || return 1; r=${r#git version }; v=" ${r%% *}"; }
m requirements
v=; req flock use_flock
req setsid setsid true
req sha256sum use_sha256sum
req shasum use_shasum
req git use_git; v=
req proc test -r /proc/$$/stat
req ps ps -o pid
use_bwrap() {
  b=$(command -v bwrap) || return 1
  "$b" --die-with-parent --new-session --unshare-pid --cap-drop ALL --ro-bind / / \
    --dev /dev --proc /proc --tmpfs /tmp -- true || return 1
  v=" $b"
}
req bwrap use_bwrap; v=
m end
