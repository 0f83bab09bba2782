# saphan-dest-kinds — list what a provision's dest passes through in the
# scratch tree (src/provision.rs, place_on); saphan decides from the list
# (provision::judge_dest), exactly as for this machine.
#
# Arguments: $1 the scratch tree, $2 the dest (relative, `/`-separated,
#   already validated to stay inside the tree).
# Prints, on stdout, one word a line for each component of $2 from the
#   first, stopping after the first that is not a directory: `link` (a
#   symlink), `missing`, `dir`, `other` (anything else that exists).
# Exit: 0.
cur=$1 d=$2
old_ifs=$IFS; IFS=/; set -f
# shellcheck disable=SC2086 # the dest is split on / on purpose
set -- $d
set +f; IFS=$old_ifs
for c in "$@"; do
  cur=$cur/$c
  if [ -L "$cur" ]; then echo link; exit 0; fi
  if [ ! -e "$cur" ]; then echo missing; exit 0; fi
  if [ -d "$cur" ]; then echo dir; else echo other; exit 0; fi
done
exit 0
