"""The tracker's REST endpoints under /api/v1/, one module per resource."""
