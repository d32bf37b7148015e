"""Git repositories linked to a project (SPEC § 16): mirrors, selectors and the read layer."""
