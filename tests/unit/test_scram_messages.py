"""The server's reading of SCRAM client-first messages: exactly RFC 5802's form, so the one
user whose credential is checked is the one authenticated."""

from __future__ import annotations

import base64
import hashlib

import pytest

from samsa.security.scram import (
    ScramClient,
    ScramCredential,
    ScramError,
    ScramMechanism,
    ScramServer,
    parse_client_first,
    unknown_user_salt,
)

SHA512 = ScramMechanism.SCRAM_SHA_512


def test_a_plain_client_first_names_its_user_and_nonce() -> None:
    first = parse_client_first("n,,n=alice,r=abc123")
    assert (first.username, first.nonce, first.bare) == ("alice", "abc123", "n=alice,r=abc123")


def test_escaped_commas_and_equals_signs_are_part_of_the_name() -> None:
    assert parse_client_first("n,,n=a=2Cb=3Dc,r=x").username == "a,b=c"


def test_extensions_after_the_nonce_are_kept_in_order() -> None:
    first = parse_client_first("n,,n=alice,r=x,foo=1,bar=2")
    assert first.extensions == (("foo", "1"), ("bar", "2"))


def test_an_authorization_id_equal_to_the_user_is_accepted() -> None:
    assert parse_client_first("n,a=alice,n=alice,r=x").username == "alice"


@pytest.mark.parametrize(
    "message",
    [
        "n,,n=alice,r=x,n=admin",  # a second user name
        "n,,r=x,n=admin",  # attributes out of order
        "n,,n=alice,r=x,r=y",  # a second nonce
        "n,,n=alice",  # no nonce
        "n,,n=alice,r=",  # an empty nonce
        "n,,n=,r=x",  # an empty name
        "n,,n=ad=6Din,r=x",  # an escape RFC 5802 does not define
        "n,,n=admin=,r=x",  # a bare equals sign
        "n,a=admin,n=alice,r=x",  # an authorization id for someone else
        "y,,n=alice,r=x",  # channel binding flags
        "p=tls-unique,,n=alice,r=x",
        "n,,m=ext,n=alice,r=x",  # a mandatory extension
        "n,,n=alice,r=x,tokenauth=true",  # delegation tokens
        "n,,n=alice,r=x,foo=1,foo=2",  # an extension twice
        "n,,n=alice,r=x,=1",  # an extension without a name
        "n,,n=alice,r=x,m=1",  # a reserved name as an extension
        "n,n=alice,r=x",  # no GS2 header
        "n=alice,r=x",
    ],
)
def test_a_malformed_client_first_is_refused(message: str) -> None:
    with pytest.raises(ScramError):
        parse_client_first(message)


def test_a_second_user_name_never_gets_the_checked_users_session() -> None:
    credential = ScramCredential.from_password(SHA512, "alice-secret")
    server = ScramServer(SHA512, lambda name: credential if name == "alice" else None)
    with pytest.raises(ScramError):
        server.respond(b"n,,n=alice,r=nonce,n=admin")
    assert not server.complete


def test_a_name_with_a_comma_authenticates_as_itself() -> None:
    credential = ScramCredential.from_password(SHA512, "secret")
    server = ScramServer(SHA512, lambda name: credential if name == "a,b=c" else None)
    client = ScramClient(SHA512, "a,b=c", "secret")
    final = client.final(server.respond(client.first()))
    client.verify(server.respond(final))
    assert server.complete and server.username == "a,b=c"


def test_a_client_final_with_its_attributes_twice_is_refused() -> None:
    credential = ScramCredential.from_password(SHA512, "secret")
    server = ScramServer(SHA512, lambda _name: credential)
    client = ScramClient(SHA512, "alice", "secret")
    final = client.final(server.respond(client.first())).decode()
    with pytest.raises(ScramError):
        server.respond(("c=biws," + final).encode())


def test_an_unknown_users_salt_depends_on_a_key_the_client_does_not_have() -> None:
    key_one, key_two = b"1" * 32, b"2" * 32
    assert unknown_user_salt(key_one, "nobody") == unknown_user_salt(key_one, "nobody")
    assert unknown_user_salt(key_one, "nobody") != unknown_user_salt(key_two, "nobody")
    server = ScramServer(SHA512, lambda _name: None, key_one)
    answer = server.respond(b"n,,n=nobody,r=abc").decode()
    salt = base64.b64decode(answer.split(",")[1][2:])
    assert salt == unknown_user_salt(key_one, "nobody")
    assert salt != hashlib.sha256(b"nobody").digest()
