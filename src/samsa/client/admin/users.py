"""Admin operations on users: SCRAM credentials (Describe/AlterUserScramCredentials).

The password never leaves the client: an upsertion sends a random salt and the
salted password (PBKDF2 with the given iterations), from which the broker derives
what it stores.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence

from samsa.client.admin.base import AdminBase, finish, item_error
from samsa.errors import ErrorCode, KafkaError
from samsa.protocol.api_keys import ApiKey
from samsa.security.scram import MIN_ITERATIONS, ScramMechanism

__all__ = ["ScramUpsertion", "UserAdmin"]


class ScramUpsertion:
    """Set ``user``'s credential for ``mechanism`` (``"SCRAM-SHA-256"``…) from ``password``."""

    def __init__(
        self, user: str, mechanism: str, password: str, iterations: int = MIN_ITERATIONS
    ) -> None:
        self.user = user
        self.mechanism = ScramMechanism.named(mechanism)
        self.iterations = iterations
        self.salt = secrets.token_bytes(32)
        self.salted_password = self.mechanism.salted_password(password, self.salt, iterations)

    def __repr__(self) -> str:
        return f"ScramUpsertion({self.user!r}, {self.mechanism.mechanism_name}, {self.iterations})"


class UserAdmin(AdminBase):
    """Users' SCRAM credentials."""

    async def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None, *, timeout_ms: int | None = None
    ) -> dict[str, dict[str, int]]:
        """Mechanism → iterations of each user that has credentials (every user when
        ``users`` is None). A named user without credentials raises RESOURCE_NOT_FOUND."""

        async def attempt() -> dict[str, dict[str, int]]:
            body = {"users": None if users is None else [{"name": u} for u in users]}
            response = await self._cluster.send(None, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body)
            error = item_error(int(response.error_code), "describe SCRAM credentials",
                               response.error_message)  # fmt: skip
            if error is not None:
                raise error
            found: dict[str, dict[str, int]] = {}
            for result in response.results:
                error = item_error(int(result.error_code), f"user {result.user!r}",
                                   result.error_message)  # fmt: skip
                if error is not None:
                    raise error
                found[result.user] = {
                    ScramMechanism.for_type(int(info.mechanism)).mechanism_name: int(
                        info.iterations
                    )
                    for info in result.credential_infos
                }
            return found

        return await self._retrying(attempt, "describe SCRAM credentials", timeout_ms)

    async def alter_user_scram_credentials(
        self,
        upsertions: Iterable[ScramUpsertion] = (),
        deletions: Iterable[tuple[str, str]] = (),
        *,
        raise_on_error: bool = True,
        timeout_ms: int | None = None,
    ) -> dict[str, KafkaError | None]:
        """Set credentials and delete ``(user, mechanism)`` ones; the error of each user."""
        body = {
            "deletions": [
                {"name": user, "mechanism": ScramMechanism.named(mechanism).type_code}
                for user, mechanism in deletions
            ],
            "upsertions": [
                {
                    "name": u.user,
                    "mechanism": u.mechanism.type_code,
                    "iterations": u.iterations,
                    "salt": u.salt,
                    "salted_password": u.salted_password,
                }
                for u in upsertions
            ],
        }

        async def attempt() -> dict[str, KafkaError | None]:
            response = await self._cluster.send(None, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body)
            results: dict[str, KafkaError | None] = {}
            for result in response.results:
                code = int(result.error_code)
                if code == ErrorCode.NOT_CONTROLLER:
                    raise item_error(code, "alter SCRAM credentials") or AssertionError
                results[result.user] = item_error(code, f"user {result.user!r}",
                                                  result.error_message)  # fmt: skip
            return results

        results = await self._retrying(attempt, "alter SCRAM credentials", timeout_ms)
        return finish(results, raise_on_error)


def _upsertion(u: ScramUpsertion) -> dict[str, object]:
    return {
        "name": u.user,
        "mechanism": u.mechanism.type_code,
        "iterations": u.iterations,
        "salt": u.salt,
        "salted_password": u.salted_password,
    }
