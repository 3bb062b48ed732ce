"""The one clock abstraction (client-go's k8s.io/utils/clock; standard library only): time read
and waited on through an injectable object, so the work queue's timing, the informers' backoff
and watch timing, and every time the controller writes or compares can be driven by fake time
in tests.

A :class:`Clock` has two readings: ``now()`` (monotonic seconds, for intervals and delays: the
queue's ``add_after``, rate limiting, backoff resets, expectations, lease expiry) and ``wall()``
(seconds since the epoch, for the timestamps written to the API and the times read from it:
status times, activeDeadlineSeconds, ttlSecondsAfterFinished, Events), and ``wait`` (a timed
wait on a condition variable). :class:`RealClock` reads real time; :class:`FakeClock` has one
fake time that both readings return, so one ``step`` moves delays and timestamps together.
"""

from clock.fake import FakeClock
from clock.real import Clock, RealClock

__all__ = ["Clock", "FakeClock", "RealClock"]
