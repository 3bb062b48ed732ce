"""The plans dglrun makes before a step starts, from the graph's sizes and the job's shape.

``memory`` is the memory plan: every step's peak memory against the pods' limit, checked
before anything starts (a step that will not fit fails the job at once); ``time`` is the
partition's time plan: how long partitioning will take, and while it runs how much of it is
done (the partition step's ETA). Standard library only.
"""
