"""kv_append on the CPU: the cache grows in place inside a buffer with spare positions.

The kernel keeps, per node, a buffer [batch, heads, capacity, head_dim] and the view of it that it returned
last (the present cache, which generate() passes back as the next past). When the past it is given is that
very view and the buffer has room, only the new positions are written and a longer view of the same buffer
is returned: one token's keys per layer instead of a copy of the whole cache. Anything else (a past the
caller made, an older present, a second call with the same past, a full buffer) copies into a new buffer, so
a tensor this kernel returned never changes afterwards: it only ever writes past the end of the newest view.
"""
from __future__ import annotations

import threading
import weakref

import torch

from ....runtime import kernels
from ....runtime.kernels import Kernel, NodeContext

SPARE_POSITIONS = 256  # room added when a buffer is (re)made: one reallocation every 256 tokens


class _GrowingCache:
    def __init__(self):
        self.buffer: torch.Tensor | None = None
        self.newest: weakref.ref | None = None  # the view returned last
        self.lock = threading.Lock()  # two threads calling one model must not both append to one buffer

    def __call__(self, inputs, dims):
        past, new = inputs
        length, added = past.shape[2], new.shape[2]
        with self.lock:
            buffer, newest = self.buffer, self.newest() if self.newest is not None else None
            if (newest is None or newest is not past or buffer is None or buffer.dtype != new.dtype
                    or buffer.shape[2] < length + added or buffer.shape[0] != new.shape[0]):
                buffer = torch.empty(new.shape[0], new.shape[1], length + added + SPARE_POSITIONS, new.shape[3],
                                     dtype=new.dtype)
                buffer[:, :, :length].copy_(past)
                self.buffer = buffer
            buffer[:, :, length:length + added].copy_(new)
            present = buffer[:, :, :length + added]
            self.newest = weakref.ref(present)
            return present


@kernels.register_kernel("cpu", "kv_append")
def growing_kv_append(ctx: NodeContext):
    """The cache in a buffer with spare positions, appended in place when given the view it returned last."""
    return Kernel(_GrowingCache(), "growing:kv_append")
