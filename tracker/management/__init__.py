"""Management commands of the tracker."""
