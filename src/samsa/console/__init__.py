"""samsa's web console: a Starlette app over the asyncio admin, consumer and producer
clients, with server-rendered pages (Jinja2 templates) and its own CSS — no JavaScript,
nothing loaded from outside the package. ``samsa console`` serves it with uvicorn.

Pages: the cluster overview, topics (list, one topic, create, delete, add partitions),
a topic's message browser and "produce a message", consumer groups (list, one group
with lag per partition, reset offsets). It needs the ``console`` extra.
"""

from samsa.console.app import create_app
from samsa.console.state import ConsoleSettings

__all__ = ["ConsoleSettings", "create_app"]
