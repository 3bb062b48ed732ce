#!/usr/bin/env bash
# Installs (or finds, when already there) the outside tools the project uses, and prints
#   name=path
# lines for the ones asked for. Usage: hack/tools.sh helm prometheus promtool cni runc ...
#
# What each tool is and which package brings it is declared once, in hack/prereqs.py (TOOLS);
# so is what each entry point needs (ENTRY_POINTS: `make demo` etc. resolve theirs first).
# Debian packages need root; apt-get runs only for what is missing.
set -euo pipefail
exec "${PYTHON3:-python3}" "$(dirname "$0")/prereqs.py" paths "$@"
