# saphan-resolve — is a program on the machine's PATH (src/dispatch/mod.rs)?
#
# Arguments: $1 the program's name.
# Prints: its path (or the shell's word for a builtin), ignored.
# Exit: 0 found; non-zero not found.
command -v "$1"
