"""The activity log as readers meet it: which events a reader may see beyond their projects,
and each event in words."""
