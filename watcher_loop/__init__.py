"""watcher_loop."""
