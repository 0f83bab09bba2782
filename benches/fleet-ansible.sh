#!/usr/bin/env bash
# Install ansible-core from PyPI into a virtualenv (for benches/fleet.rs) and
# print the path of its `ansible`. Usage: benches/fleet-ansible.sh [VENV_DIR]
set -euo pipefail
venv="${1:-${CARGO_TARGET_DIR:-target}/ansible-venv}"
if [ ! -x "$venv/bin/ansible" ]; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet ansible-core >&2
fi
echo "$(cd "$venv/bin" && pwd)/ansible"
