"""The knowledge base: an organization's documents, decisions, notes and debt records."""
