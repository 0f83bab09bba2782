# saphan-user-ids — who the connection runs as on the machine, so what a
# container suite writes into a shipped tree stays removable
# (src/docker/container.rs, remote_user).
#
# Arguments: $1 (optional) a directory to create first (`mkdir -p`; the
#   container suite's Go build cache under the workhome).
# Prints, on stdout: one line `UID:GID`.
# Exit: 0; non-zero when `id` failed or $1 could not be created.
if [ -n "${1-}" ]; then mkdir -p -- "$1" || exit 1; fi
echo "$(id -u):$(id -g)"
