# saphan-put — receive a file on stdin and move it into place
# (src/transport/ssh.rs, Ssh::put).
#
# Arguments: $1 the destination, $2 its mode (octal).
# Stdin: the file's bytes.
# Prints: nothing.
# Exit: 0 in place (a temp file beside it, renamed); 1 it could not be
#   written (the temp file is removed).
t="$1.saphan-put.$$"; if cat > "$t" && chmod "$2" "$t" && mv -f "$t" "$1"; then exit 0; else rm -f "$t"; exit 1; fi
