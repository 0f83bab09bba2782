# saphan-run-cleanup — remove an attempt's run directory and the stable
# tree's parent if it is empty (src/dispatch/mod.rs).
#
# Arguments: $1 the run directory, $2 the stable tree's parent directory.
# Prints: nothing.
# Exit: always 0 (best effort; the next attempt heals what is left).
rm -rf -- "$1"; rmdir -- "$2" 2>/dev/null; exit 0
