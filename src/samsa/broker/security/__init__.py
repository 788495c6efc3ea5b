"""Authentication and authorisation on the broker (Kafka's ``AclAuthorizer``/
``StandardAuthorizer``, ``SaslServerAuthenticator``, ``ScramCredentialCache``).

:mod:`.authorizer` decides, :mod:`.authorized_operations` answers what a principal may do
to a resource, :mod:`.sasl_authenticator` runs the SASL exchanges, :mod:`.scram_credentials`
keeps SCRAM users, :mod:`.security_config` reads the listeners' TLS and SASL settings.
"""
