# saphan-have-binary — is the shipped saphan binary on the machine, and
# what are its bytes (src/dispatch/mod.rs)?
#
# Arguments: $1 the content-addressed path of the binary
#   (`<workhome>/saphan/bin/saphan-<sha256>`), $2 the text of sha256.sh
#   (the one hashing rule, run here on $1).
# Prints, on stdout, when the file is there: sha256.sh's line,
#   `<64 hex digits>  <file>`; the caller compares the digest with the one
#   in the name, and re-ships on any difference (a file is trusted by its
#   bytes, never by its name).
# Exit: 0 it is there and was hashed; 1 it is not there, or not an
#   executable regular file (its directory is created, so the caller can
#   put it there); other: sha256.sh's (it could not be hashed).
b=$1 s=$2
if [ -L "$b" ] || [ ! -f "$b" ] || [ ! -x "$b" ]; then
  mkdir -p "$(dirname "$b")"
  exit 1
fi
set -- "$b"
eval "$s"
