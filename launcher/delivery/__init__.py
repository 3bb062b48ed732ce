"""Steps 2 and 3, deliver and dispatch: worker *i* gets part *i* straight from the pod that
holds the parts, never through the API server.

``wire`` is the contract both ends agree on (token, manifest, ``/v1`` paths); ``server``
serves a partition set (``python -m launcher.delivery.server``, the partitioner's or
``--transport local``'s); ``pull`` runs on each worker (``python -m launcher.delivery.pull``)
and writes every file only once its SHA-256 matches. The KubectlCp path (``kubectl cp``
through the launcher) is launcher.workers.kubectl's ``deliver``.
"""
