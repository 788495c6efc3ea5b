"""The console's ASGI application: its routes, its guard (Host allow-list, login, and the
read-only, same-origin and CSRF checks on changes: :mod:`samsa.console.guard`), and the
pages shown when the cluster refuses or does not answer (a broker refusing connections
is named at once: :mod:`samsa.console.reach`).

``create_app(settings)`` returns a Starlette app; its lifespan opens the console's
clients on the server's loop and closes them at shutdown. Static files (CSS) and
templates are package data: the console needs nothing from outside the package.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from samsa.client.errors import ClientTimeoutError
from samsa.console.acl_pages import acls_page, alter_acl
from samsa.console.broker_pages import broker_page, brokers_list
from samsa.console.group_pages import (
    delete_group,
    delete_offsets,
    group_page,
    groups_list,
    reset_offsets,
)
from samsa.console.guard import Guard
from samsa.console.message_pages import messages_page, produce
from samsa.console.quota_pages import alter_quota, quotas_page
from samsa.console.reach import Reachability
from samsa.console.state import PACKAGE, Console, ConsoleSettings, render
from samsa.console.topic_pages import (
    add_partitions,
    alter_topic_configs,
    create_topic,
    delete_topic,
    overview,
    topic_page,
    topics_list,
)
from samsa.console.user_pages import alter_user, users_page
from samsa.errors import ErrorCode, KafkaError

__all__ = ["create_app"]

log = logging.getLogger(__name__)

NOT_FOUND_CODES = (
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.GROUP_ID_NOT_FOUND,
)


async def _kafka_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, KafkaError)
    status = 404 if exc.code in NOT_FOUND_CODES else 502
    return render(request, "error.html", status_code=status, error=str(exc), title=exc.name)


async def _timeout(request: Request, exc: Exception) -> Response:
    return render(
        request,
        "error.html",
        status_code=504,
        title="The cluster did not answer",
        error=f"{exc}: is the broker running? The page retries when you reload it.",
    )


def create_app(settings: ConsoleSettings) -> Starlette:
    """The console for the cluster ``settings.client_properties`` names."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        console = Console(settings)
        app.state.console = console
        await console.start()
        try:
            yield
        finally:
            await console.close()

    routes = [
        Route("/", overview, name="overview"),
        Route("/brokers", brokers_list, name="brokers"),
        Route("/brokers/{broker}", broker_page, name="broker"),
        Route("/topics", topics_list, name="topics"),
        Route("/topics", create_topic, methods=["POST"]),
        Route("/topics/{topic}", topic_page, name="topic"),
        Route("/topics/{topic}/partitions", add_partitions, methods=["POST"]),
        Route("/topics/{topic}/configs", alter_topic_configs, methods=["POST"]),
        Route("/topics/{topic}/delete", delete_topic, methods=["GET", "POST"]),
        Route("/topics/{topic}/messages", messages_page, name="messages"),
        Route("/topics/{topic}/messages", produce, methods=["POST"]),
        Route("/groups", groups_list, name="groups"),
        Route("/quotas", quotas_page, name="quotas"),
        Route("/quotas", alter_quota, methods=["POST"]),
        Route("/users", users_page, name="users"),
        Route("/acls", acls_page, name="acls"),
        Route("/acls", alter_acl, methods=["POST"]),
        Route("/users", alter_user, methods=["POST"]),
        Route("/groups/{group_id:path}", group_page, name="group"),
        Route("/group-offsets/reset", reset_offsets, methods=["POST"]),
        Route("/group-offsets/delete", delete_offsets, methods=["POST"]),
        Route("/group-delete", delete_group, methods=["POST"]),
        Mount("/static", StaticFiles(directory=PACKAGE / "static"), name="static"),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(Guard), Middleware(Reachability)],
        exception_handlers={KafkaError: _kafka_error, ClientTimeoutError: _timeout},
        lifespan=lifespan,
    )
