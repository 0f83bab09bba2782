# saphan-fetch — bring back the accepted report files in one stream
# (src/measure/collect.rs), after saphan judged their description
# (report-classify.sh): inside the tree, regular, within the size bound.
#
# Arguments: $1 the most bytes to send (the sum of the described sizes
#   plus one: more means a file grew since it was described).
# Stdin: the files' resolved paths, NUL-terminated, in order.
# Prints, on stdout: the files' bytes, one after another, in order, at
#   most $1 bytes in all (saphan cuts the stream at the described sizes,
#   and fails the collection when the total differs from their sum).
# Exit: 0; xargs' status when a file could not be read (123) or the
#   stream was cut at $1 bytes (a status past 123).
exec 3>&1
rc=$( { { xargs -0 cat -- 3>&- 4>&-; echo "$?" >&4; } | head -c "$1" >&3 3>&- 4>&-; } 4>&1 )
exit "$rc"
