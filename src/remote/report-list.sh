# saphan-list — list the candidates for a report_path under a tree
# (src/measure/collect.rs); saphan matches the glob and decides.
#
# Arguments: $1 the tree (the report root), $2 the glob's literal directory
#   prefix, relative to $1 (`.` or `./a/b`), $3 the most listing bytes to
#   send (the caller's cap plus one: more than the cap means "too long").
# Prints, on stdout, NUL-terminated: first the tree's real path (`cd -P`),
#   then every file, symlink, FIFO, socket or device under $2 (never
#   descending into `.git`), as `$2/…`, at most $3 bytes of names in all.
#   The caller reads the listing whole (a file) or fails the measurement as
#   report-listing-unbounded — never a cut tail.
# Exit: 0; 1 the tree is not there; find's status when it failed (a
#   directory it could not read; 141 when cut at $3 bytes).
cd -P -- "$1" || exit 1
printf '%s\0' "$(pwd)"
[ -e "$2" ] || [ -L "$2" ] || exit 0
# find's own status is kept through the pipe (a directory it could not read
# must fail the listing, not shorten it).
exec 3>&1
rc=$( { { find "$2" -name .git -prune -o \( -type f -o -type l -o -type p -o -type s -o -type c -o -type b \) -print0 3>&- 4>&-; echo "$?" >&4; } | head -c "$3" >&3 3>&- 4>&-; } 4>&1 )
exit "$rc"
