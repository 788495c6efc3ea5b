"""The client quotas page: every entity (user, client id, IP address or their
defaults) with its quotas, a form setting one quota and a button removing one; each
change is validated by the broker (validate_only) before it is applied."""

from __future__ import annotations

import math

from starlette.requests import Request
from starlette.responses import Response

from samsa.client.admin import ClientQuotaAlteration
from samsa.console.state import audit, clients_of, redirect, render
from samsa.errors import KafkaError

__all__ = ["alter_quota", "quotas_page"]

ENTITY_TYPES = ("user", "client-id", "ip")
QUOTA_KEYS = (
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
    "connection_creation_rate",
)


def _entity_text(entity: tuple[tuple[str, str | None], ...]) -> str:
    return ", ".join(f"{kind} {name if name is not None else '(default)'}"
                     for kind, name in entity)  # fmt: skip


async def quotas_page(request: Request) -> Response:
    quotas = await clients_of(request).admin.describe_client_quotas()
    rows = [
        {"entity": entity, "text": _entity_text(entity), "key": key, "value": value}
        for entity, values in sorted(quotas.items(), key=lambda item: _entity_text(item[0]))
        for key, value in sorted(values.items())
    ]
    return render(request, "quotas.html", rows=rows, entity_types=ENTITY_TYPES,
                  quota_keys=QUOTA_KEYS)  # fmt: skip


async def alter_quota(request: Request) -> Response:
    """Set quota ``key`` of entity ``entity_type``/``name`` (empty: the type's default)
    to ``value``, or remove it when ``remove`` is given."""
    form = await request.form()
    kind = str(form.get("entity_type", ""))
    name = str(form.get("name", "")).strip() or None
    key = str(form.get("key", ""))
    if kind not in ENTITY_TYPES or key not in QUOTA_KEYS:
        return redirect("/quotas", error=f"choose an entity type ({', '.join(ENTITY_TYPES)}) "
                        f"and a quota ({', '.join(QUOTA_KEYS)})")  # fmt: skip
    value: float | None = None
    if not form.get("remove"):
        text = str(form.get("value", "")).strip()
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            return redirect("/quotas", error=f"{text!r} is not a number")
    entity = {kind: name}
    what = _entity_text(((kind, name),))
    change = f"{key} of {what} " + ("removed" if value is None else f"set to {value:.15g}")
    admin = clients_of(request).admin
    for validate_only in (True, False):
        try:
            results = await admin.alter_client_quotas(
                [ClientQuotaAlteration(entity, {key: value})],
                validate_only=validate_only,
                raise_on_error=False,
            )
            error = next(iter(results.values()), None)
        except KafkaError as exc:
            error = exc
        if error is not None:
            audit(request, "failed to change client quota (%s): %s", change, error)
            return redirect("/quotas", error=f"cannot change the quota: {error}")
    audit(request, "changed client quota: %s", change)
    return redirect("/quotas", notice=f"Quota {change}.")
