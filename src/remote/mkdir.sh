# saphan-mkdir — create a directory and its parents (src/dispatch/mod.rs).
#
# Arguments: $1 the directory.
# Prints: mkdir's complaint on stderr.
# Exit: 0 it exists now; non-zero it could not be created.
mkdir -p "$1"
