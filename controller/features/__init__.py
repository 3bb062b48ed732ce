"""The features that cut across a DGLJob's children and lifecycle, one module each: the
storage (``spec.storage``), the partition transfer over HTTP, gang scheduling, the
NetworkPolicy, elastic jobs and Kueue. Each module holds its feature's children, its pod
changes and its pure rules; its entry in controller/features/registry.py is how the builders
and the lifecycle's steps reach it.

(Nothing is imported here: the builders use the storage's and the transfer's modules, which
must not pull in the registry and the status modules it reaches.)
"""
