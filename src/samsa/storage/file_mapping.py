"""A shared memory mapping of a file that holds no file descriptor.

Python's :class:`mmap.mmap` keeps a duplicate of the file's descriptor for as
long as the mapping lives (``trackfd=False`` only exists from Python 3.13), so
every mapped index costs a descriptor: two per partition, which made 10,000
partitions impossible under a 20,000-descriptor limit. The kernel needs no
descriptor to keep a mapping, so this maps with ``mmap(2)`` through ctypes and
closes nothing of the caller's: the caller closes its descriptor right after.

:attr:`FileMapping.buffer` is a ctypes byte array over the mapped pages: it
supports slicing, slice assignment and the buffer protocol (``struct.pack_into``,
``unpack_from``). Touching it after :meth:`FileMapping.close` would read unmapped
memory, so the owner drops every reference at close (:class:`~samsa.storage.index.SparseIndex`
reaches it only through its own checked attribute) and no memoryview of it is
ever kept. The usual mmap rule holds: a store into a page the filesystem has
not allocated raises SIGBUS on a full disk, which the index avoids with
``posix_fallocate``.

Thread-safety: :meth:`flush` may run on a worker thread while the owner
writes; a flush that races a close is skipped (the pages are in the page cache;
the next flush or the kernel writes them back).
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]  # fmt: skip
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.msync.restype = ctypes.c_int
_libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_MAP_FAILED = ctypes.c_void_p(-1).value
_MS_SYNC = 4  # Linux


def _raise_errno(what: str) -> None:
    code = ctypes.get_errno()
    raise OSError(code, f"{what}: {os.strerror(code)}")


class FileMapping:
    """The first ``length`` bytes of the file open as ``fd``, mapped shared (``length`` > 0)."""

    def __init__(self, fd: int, length: int, *, writable: bool) -> None:
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        address = _libc.mmap(None, length, prot, mmap.MAP_SHARED, fd, 0)
        if address is None or address == _MAP_FAILED:
            _raise_errno("mmap")
        self._address: int | None = address
        self.length = length
        self.buffer = (ctypes.c_char * length).from_address(address)

    @property
    def closed(self) -> bool:
        return self._address is None

    def zero(self, start: int, end: int) -> None:
        """Store zeros in bytes ``[start, end)``."""
        if not 0 <= start <= end <= self.length or self._address is None:
            raise ValueError(f"cannot zero [{start}, {end}) of a {self.length}-byte mapping")
        ctypes.memset(self._address + start, 0, end - start)

    def flush(self) -> None:
        """msync the mapping (blocking); nothing if it was closed meanwhile."""
        address = self._address
        if address is None:
            return
        if _libc.msync(address, self.length, _MS_SYNC) != 0:
            if ctypes.get_errno() == errno.ENOMEM:
                return  # unmapped by a close that raced this flush
            _raise_errno("msync")

    def close(self) -> None:
        """Unmap (dirty pages stay in the page cache and reach the file as usual)."""
        address = self._address
        if address is None:
            return
        self._address = None
        del self.buffer
        if _libc.munmap(address, self.length) != 0:
            _raise_errno("munmap")
