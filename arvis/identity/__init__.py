"""Who is calling (DESIGN §7, §9): API keys, JWTs of trusted OpenID Connect issuers, and
an agent acting for a person.

:class:`~arvis.identity.extraction.Authenticator` is the one identity extraction: the v1
routes, the syscall fast lane, ``/mcp``, the console's sign-in and the CLI's calls made
with a bearer credential all turn it into an :class:`~arvis.domain.identity.Identity`
here, so no entry point accepts a credential another would refuse.
"""
