# saphan-write — write stdin to a file (src/provision.rs, the provisions'
# exclude file).
#
# Arguments: $1 the file (created or replaced).
# Stdin: its bytes.
# Prints: the shell's complaint on stderr.
# Exit: 0 written; non-zero it could not be.
cat > "$1"
