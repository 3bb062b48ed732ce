"""watcher-loop: the launcher's init container that waits for the pods listed in a pod file.

It re-reads the file (``WATCHERFILE``) until it lists the expected pods, then list+watches each
of them by name (``fieldSelector=metadata.name=<pod>``, what a Role limited to the job's pod
names allows) until every one is ready (``WATCHERMODE=ready``) or has finished (``finished``).
Modules: :mod:`~watcher_loop.podfile` (file parsing), :mod:`~watcher_loop.state` (the pure
``evaluate``), :mod:`~watcher_loop.config` (environment and flags), :mod:`~watcher_loop.pods`
(one reflector per pod, one view), :mod:`~watcher_loop.loop` (``run``) and ``__main__`` (the
console script).
"""
