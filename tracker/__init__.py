"""The tracker: organizations, projects, roles, the plan, changesets, skills, activity."""
