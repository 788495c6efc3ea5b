"""Real resource faults for storage tests: too few file descriptors, a file size limit."""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def descriptors_left(count: int) -> Iterator[None]:
    """Run the body with exactly ``count`` file descriptors left before EMFILE.

    The soft limit is lowered a little above the descriptors in use and the
    free slots are filled with ``/dev/null`` (idle connections would hold them);
    ``count`` of them are given back. The limit and the slots are restored after.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = max(int(name) for name in os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, in_use + 64), hard))
    held: list[int] = []
    try:
        while True:
            try:
                held.append(os.open(os.devnull, os.O_RDONLY))
            except OSError as exc:
                assert exc.errno == errno.EMFILE
                break
        for _ in range(count):
            os.close(held.pop())
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@contextlib.contextmanager
def file_size_limit(max_bytes: int) -> Iterator[None]:
    """Writes past ``max_bytes`` of any file fail (EFBIG) or are cut short, as the kernel does."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
