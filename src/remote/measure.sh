# saphan-measure — a machine's confinement facts in one round trip
# (src/fleet/measure.rs, `machine measure`).
#
# Arguments: none.
# Prints, on stdout: sections, each introduced by a line
#   `@@saphan-measure:<name>` (uname, os-release, cpus, memory, uid,
#   userns-max, userns-clone, userns-unshare) and the whole closed by
#   `@@saphan-measure:end`. userns-unshare is `ok`, `fail` or `missing`.
#   Files are read with shell builtins; only uname, getconf, id and unshare
#   are started.
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
m end
