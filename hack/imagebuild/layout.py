"""Where things sit in the images: the non-root user, the project's site-packages."""

from __future__ import annotations

NONROOT_UID = 65532
NONROOT_NAME = "nonroot"
APP_SITE = "opt/dgl-operator/site-packages"
