# saphan-slurm-login — the login of every command saphan runs on a
# borrowed Slurm node (src/transport/srun.rs). srun starts it with
# --export=NONE, so nothing of saphan's own environment reaches the node;
# this gives the command what sshd gives one on an SSH machine.
#
# Arguments: $1 the command line (POSIX-sh words, each quoted by saphan).
# Environment: what Slurm leaves a task under --export=NONE (SLURM_*,
#   TMPDIR). The user is `id -u`'s; their entry is `getent passwd UID`'s,
#   else the line of /etc/passwd with that uid.
# Sets, for the command line: HOME, USER, LOGNAME and SHELL from that entry
#   (HOME / and SHELL /bin/sh when it has none; USER the uid when there is
#   no entry), PATH /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin;
#   the working directory is HOME (else /), as a login's.
# Prints: nothing of its own.
# Exit: the command line's (`exec /bin/sh -c`).
u=$(id -u)
n='' h='' s=''
e=$(getent passwd "$u" 2>/dev/null) || e=
if [ -n "$e" ]; then
  IFS=: read -r n _ _ _ _ h s <<EOT
$e
EOT
elif [ -r /etc/passwd ]; then
  while IFS=: read -r n _ i _ _ h s; do
    [ "$i" = "$u" ] && break
    n='' h='' s=''
  done < /etc/passwd
fi
HOME=${h:-/} USER=${n:-$u} LOGNAME=${n:-$u} SHELL=${s:-/bin/sh}
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME USER LOGNAME SHELL PATH
cd -- "$HOME" 2>/dev/null || cd /
exec /bin/sh -c "$1"
