# saphan-mkdir — create directories and their parents (src/dispatch/mod.rs).
#
# Arguments: $1… the directories (at least one).
# Prints: mkdir's complaint on stderr.
# Exit: 0 they all exist now; non-zero one could not be created.
mkdir -p -- "$@"
