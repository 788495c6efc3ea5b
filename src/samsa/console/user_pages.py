"""The SCRAM users page: every user with SCRAM credentials (mechanism and iterations,
never a secret), a form setting a user's password for one mechanism, and a button
deleting one credential. The password is salted and hashed by the admin client: the
broker receives only the salted password, and the console logs only who changed which
user."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from samsa.client.admin import ScramUpsertion
from samsa.console.state import audit, clients_of, int_param, redirect, render
from samsa.errors import KafkaError
from samsa.security.scram import MAX_ITERATIONS, MIN_ITERATIONS

__all__ = ["alter_user", "users_page"]

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


async def users_page(request: Request) -> Response:
    users = await clients_of(request).admin.describe_user_scram_credentials()
    rows = [
        {"user": user, "mechanism": mechanism, "iterations": iterations}
        for user, credentials in sorted(users.items())
        for mechanism, iterations in sorted(credentials.items())
    ]
    return render(request, "users.html", rows=rows, mechanisms=MECHANISMS,
                  min_iterations=MIN_ITERATIONS, max_iterations=MAX_ITERATIONS)  # fmt: skip


async def alter_user(request: Request) -> Response:
    """Set ``user``'s ``mechanism`` credential from ``password``, or delete it when
    ``delete`` is given."""
    form = await request.form()
    user = str(form.get("user", "")).strip()
    mechanism = str(form.get("mechanism", ""))
    if not user or mechanism not in MECHANISMS:
        return redirect("/users", error=f"name a user and a mechanism ({', '.join(MECHANISMS)})")
    deleting = bool(form.get("delete"))
    password = str(form.get("password", ""))
    if not deleting and not password:
        return redirect("/users", error="type the user's password")
    iterations = int_param(str(form.get("iterations", "")), MIN_ITERATIONS, MIN_ITERATIONS,
                           MAX_ITERATIONS)  # fmt: skip
    admin = clients_of(request).admin
    what = f"the {mechanism} credential of user {user!r}"
    try:
        if deleting:
            await admin.alter_user_scram_credentials(deletions=[(user, mechanism)])
        else:
            upsertion = ScramUpsertion(user, mechanism, password, iterations)
            await admin.alter_user_scram_credentials([upsertion])
    except KafkaError as exc:
        audit(request, "failed to %s %s: %s", "delete" if deleting else "set", what, exc)
        return redirect("/users", error=f"cannot {'delete' if deleting else 'set'} {what}: {exc}")
    audit(request, "%s %s", "deleted" if deleting else "set", what)
    return redirect("/users", notice=f"{'Deleted' if deleting else 'Set'} {what}.")
