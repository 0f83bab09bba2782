# saphan-exists — does a path exist on the machine (src/dispatch/mod.rs)?
#
# Arguments: $1 the path.
# Prints: nothing.
# Exit: 0 it exists; 1 it does not.
test -e "$1"
