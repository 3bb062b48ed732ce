#!/usr/bin/env python3
"""Build the project's images without Docker, as OCI image-layout tarballs.

    python hack/build_images.py [--out DIR] [--only operator,watcher-loop,...] [--tag 0.2.0]

Prints what was built or reused with times and sizes (stderr) and the tarball paths (stdout);
``--help`` lists every option. The images, their layers and the cache: :mod:`imagebuild`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from imagebuild.cli import main

if __name__ == "__main__":
    sys.exit(main())
