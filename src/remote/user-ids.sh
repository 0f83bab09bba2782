# saphan-user-ids — who the connection runs as on the machine, so what a
# container suite writes into a shipped tree stays removable
# (src/docker/container.rs, remote_user).
#
# Arguments: none.
# Prints, on stdout: one line `UID:GID`.
# Exit: 0; non-zero when `id` failed.
echo "$(id -u):$(id -g)"
