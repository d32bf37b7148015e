"""The tracker's interfaces: REST (``apis/``, serializers, errors, authentication), the pages
and their helpers, forms, middleware and URLs. Nothing below imports them
(``docs/architecture.md#the-tracker-in-rooms``)."""
