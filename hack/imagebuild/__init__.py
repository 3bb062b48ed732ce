"""Building the project's images without Docker, as OCI image-layout tarballs
(``hack/build_images.py`` is the command line: :mod:`imagebuild.cli`).

Builds the images that ``images/Dockerfile`` describes (same layout, user, entrypoints, env and
labels), each as a tarball that ``ctr -n k8s.io images import <tarball>`` accepts:

=================  ========================================  =================================
image              layers                                    runs
=================  ========================================  =================================
operator           base, app                                 ``dgl-operator``
watcher-loop       base, app                                 ``watcher-loop``
kubectl-download   base, app, kubectl                        ``kubectl-download``
graphsage          base, mpi, dgl-cpu, app-dglrun..., ex...  ``dglrun`` (WORKDIR /dgl_workspace)
graphsage-gpu      base, mpi, dgl-gpu, app-dglrun..., ex...  the same, tagged <tag>-gpu
pause              pause                                     ``/pause`` (a sandbox image)
=================  ========================================  =================================

* base: Debian bookworm from ``debootstrap --variant=minbase`` plus python3 (3.11) and
  ca-certificates, cleaned (apt lists and caches, docs but copyright files, man pages, locales,
  logs, host files), with the user ``nonroot`` (65532). Needs root (debootstrap chroots).
* app: ``pip install --target /opt/dgl-operator/site-packages`` of a wheel of this checkout and
  its runtime dependencies, with this interpreter's pip (Python 3.11, the base's ABI), no
  chroot; byte-compiled with unchecked-hash pycs; console-script wrappers in /usr/local/bin.
  app-dglrun is the project alone (``--no-deps``: dglrun needs the standard library only).
* mpi: Open MPI (``openmpi-bin``) and PT-Scotch's ParMETIS API (``libptscotch-7.0``) for the
  ParMETIS modes: a second debootstrap with these packages, minus every file the base already
  has byte for byte (so the base stays shared by all images).
* dgl: the DGL environment of requirements-dgl.txt at /opt/dgl/site-packages, hard-linked from
  the DGL venv that ``make dgl-venv`` built (or, with ``--dgl-source pip``, installed with pip),
  uncompressed (gzip would cost minutes on every change). Two variants (``dgl.VARIANTS``): cpu
  (graphsage, 1.2 GB) leaves out torch's CUDA wheels and libraries, with stubs where kept
  libraries need them (``cudastub``); gpu (graphsage-gpu, built only when asked for, 5.6 GB)
  keeps everything.
* kubectl: the kubectl ``hack/k8s-binaries.sh kubectl`` builds, at /usr/local/bin/kubectl.
* examples: examples/graphsage/*.py at /dgl_workspace/code, the synthetic dataset
  (make_dataset.py, seed 0) at /dgl_workspace/raw_data (the workspace owned by 65532), and
  the same graph in DGL's chunked format (``dgl-chunk-graph``, 4 chunks) at
  /dgl_workspace/chunked, the ParMETIS modes' input.
* pause: a static C program (gcc -static) that sleeps until SIGTERM/SIGINT and reaps children.

Layers are deterministic (sorted entries, fixed mtimes, uid/gid 0 or 65532, no owner names,
normalised modes, gzip without timestamps) and cached under ``~/.cache/dgl-operator/images``
by a hash of their inputs; an image whose tarball already holds the same manifest is reused.
Modules: one per layer (base, mpi, dgl, app, kubectl, examples, pause; pause.c is the pause
program's source; cudastub writes the CPU variant's stubs), ``images`` (which layers and
config each image has, the tarball), ``context`` (one build's settings and the layer cache),
``oci`` (the OCI writer; its docstring says why umoci, buildah and skopeo do not replace it),
``cli`` (the options). Standard library only; ``hack/build_images.py`` puts ``hack/`` on
``sys.path``.
"""
