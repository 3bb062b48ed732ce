"""kubectl_download."""
