"""kubectl-download: the init container that installs a verified kubectl into /opt/kube.

Standard library only. Downloads ``KUBECTL_URL`` (with retries, checked against
``KUBECTL_SHA256``) or copies ``KUBECTL_SOURCE`` (a kubectl baked into the image), checks that
the binary runs (``version --client``), and renames it over ``<TARGET_DIR>/kubectl`` in one
step. Modules: :mod:`~kubectl_download.config`, :mod:`~kubectl_download.install` and
``__main__`` (the console script).
"""
