"""Who may do what (``docs/trust.md``): the one permission check, credentials and API keys'
scopes, encryption of stored secrets, the failed-login limit and rate limits."""
