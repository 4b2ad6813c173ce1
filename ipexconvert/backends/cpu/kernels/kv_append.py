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
from typing import Optional

import torch

from ....ir.ops._kv_int8 import to_cache
from ....runtime import kernels
from ....runtime.kernels import Kernel, NodeContext

SPARE_POSITIONS = 256  # room added when a buffer is (re)made: one reallocation every 256 tokens


class _GrowingCache:
    def __init__(self):
        self.buffer: torch.Tensor | None = None
        self.newest: weakref.ref | None = None  # the view returned last
        self.length = 0  # its positions, and the buffer's (plain ints: a decode step checks them without torch)
        self.capacity = 0
        self.lock = threading.Lock()  # two threads calling one model must not both append to one buffer

    def reserve(self, past: torch.Tensor, added: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(buffer, present): a buffer holding `past` with room for `added` more positions (of `like`'s batch, heads,
        head size and dtype) and the view of it the present will be, once the caller writes the new positions
        [past length, past length + added). Other callers never write there: a later call with an older past
        copies into a buffer of its own."""
        with self.lock:
            buffer, newest = self.buffer, self.newest() if self.newest is not None else None
            if newest is past and self.length + added <= self.capacity and like is past:
                length = self.length  # the common case (a decoder's next step): past is a view of buffer
            else:
                length = past.shape[2]
                if (newest is None or newest is not past or buffer is None or buffer.dtype != like.dtype
                        or buffer.shape[2] < length + added or buffer.shape[0] != like.shape[0]):
                    buffer = torch.empty(like.shape[0], like.shape[1], length + added + SPARE_POSITIONS, like.shape[3],
                                         dtype=like.dtype)
                    buffer[:, :, :length].copy_(past)
                    self.buffer, self.capacity = buffer, buffer.shape[2]
            present = buffer.narrow(2, 0, length + added)  # (narrow: one call; indexing costs several)
            self.newest, self.length = weakref.ref(present), length + added
            return buffer, present

    def hand_over(self, newest: torch.Tensor) -> Optional[torch.Tensor]:
        """The buffer whose newest view is `newest`, handed to a bound plan's recorded appends (which write into it
        themselves, at the length a cell holds: runtime/bound_plan.py); this cache forgets it, so a later call copies
        any past it is given into a buffer of its own. None if `newest` is not the view this cache returned last."""
        with self.lock:
            buffer, current = self.buffer, self.newest() if self.newest is not None else None
            if buffer is None or current is not newest:
                return None
            self.buffer, self.newest, self.length, self.capacity = None, None, 0, 0
            return buffer

    def __call__(self, inputs, dims):
        past, new = inputs
        buffer, present = self.reserve(past, new.shape[2], past)  # (the cache's dtype: it may be narrower than new's)
        present.narrow(2, past.shape[2], new.shape[2]).copy_(to_cache(new, present.dtype))
        return present


@kernels.register_kernel("cpu", "kv_append")
def growing_kv_append(ctx: NodeContext):
    """The cache in a buffer with spare positions, appended in place when given the view it returned last."""
    return Kernel(_GrowingCache(), "growing:kv_append")
