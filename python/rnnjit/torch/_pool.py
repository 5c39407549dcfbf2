"""Executions on loan: one prepared rnnjit.Execution per call in flight.

An Execution keeps one reserve, from a forward call in training mode to its backward calls, and
must not be used by two threads at once. A model may run forward several times before any
backward (gradient accumulation, several inputs, checkpointing), so each call borrows an
Execution of its shape and mode for as long as its reserve is needed and gives it back after
backward, or when autograd drops the graph without running backward. Steady-state training
holds one Execution per shape and allocates nothing after the first step; plans and kernels
come from rnnjit's process-wide cache, so a new Execution of a known shape compiles nothing.
"""

import threading
from collections import OrderedDict

# Idle Executions kept per key, and keys kept (least recently used dropped first): enough for
# a few shapes in turn without holding workspace for every sequence length ever seen.
_IDLE_PER_KEY = 2
_KEYS = 16


class Lease:
    """An Execution borrowed from a pool; given back once, explicitly or when collected."""

    __slots__ = ("execution", "_pool", "_key")

    def __init__(self, pool, key, execution):
        self.execution = execution
        self._pool = pool
        self._key = key

    def release(self):
        pool, self._pool = self._pool, None
        if pool is not None:
            pool._give_back(self._key, self.execution)

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown: nothing left to give back to
            pass


class ExecutionPool:
    """Idle Executions by key (configuration, shape, mode)."""

    def __init__(self):
        self._idle = OrderedDict()
        self._lock = threading.Lock()

    def acquire(self, key, rnn, shape, mode):
        """An Execution on loan until its Lease is released (a training call, until backward)."""
        return Lease(self, key, self.take(key, rnn, shape, mode))

    def take(self, key, rnn, shape, mode):
        """An idle Execution of `key`, or a new one; the caller gives it back (_give_back)."""
        with self._lock:
            idle = self._idle.get(key)
            if idle:
                self._idle.move_to_end(key)
                return idle.pop()
        return rnn.prepare(shape, mode)  # plans through the cache; no lock held

    def _give_back(self, key, execution):
        with self._lock:
            idle = self._idle.setdefault(key, [])
            self._idle.move_to_end(key)
            if len(idle) < _IDLE_PER_KEY:
                idle.append(execution)
            while len(self._idle) > _KEYS:
                self._idle.popitem(last=False)

    def clear(self):
        with self._lock:
            self._idle.clear()

    # A copy (copy.deepcopy, pickle) starts with an empty pool: Executions are not copied.
    def __reduce__(self):
        return (ExecutionPool, ())
