"""Sockets to requests (Kafka's ``SocketServer``: ``Acceptor``, ``Processor``, ``RequestChannel``).

:mod:`.acceptor` listens and accepts, :mod:`.connection` runs one client's request loop
(framing with :mod:`.frame_receiver` into :mod:`.frame_buffers` from :mod:`.memory_pool`),
:mod:`.registry` maps an API key and version to its handler, :mod:`.loop_monitor` watches
the event loop for stalls.
"""
