# saphan-have-binary — is the shipped saphan binary already on the machine
# (src/dispatch/mod.rs)?
#
# Arguments: $1 the content-addressed path of the binary.
# Prints: nothing.
# Exit: 0 it is there and executable; 1 it is not (its directory is created,
#   so the caller can put it there).
test -x "$1" || { mkdir -p "$(dirname "$1")"; exit 1; }
